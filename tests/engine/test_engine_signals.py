"""Interruptions of a real `iterion run` process: SIGINT/SIGTERM cancel, SIGKILL leaves the store intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store
from gitrefs.persist.atomic import is_temp_leftover

from ..conftest import start_cli, wait_for_file
from .conftest import events, labels, write_bot

SLOW = """
tool first:
  command: "echo first > first.txt"

tool slow:
  command: "sleep 60 & echo $! > child.pid; echo started > slow.started; wait"

tool after:
  command: "echo after > after.txt"

workflow slowpoke:
  entry: first
  first -> slow
  slow -> after
  after -> done
"""


def _start(bot: Path, ws: Path, store_dir: Path) -> subprocess.Popen[str]:
    return start_cli("run", str(bot), "--workspace", str(ws), cwd=ws, store=store_dir)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_cancels_kills_the_tool_group_and_persists(tmp_path: Path, ws: Path, sig: signal.Signals) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    store_dir = tmp_path / "store"
    proc = _start(bot, ws, store_dir)
    wait_for_file(ws / "slow.started", proc)
    child = int((ws / "child.pid").read_text())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 6, err  # the documented exit code of a cancelled run
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the tool's process group survived the cancel"
    store = Store(store_dir)
    (doc,) = store.list_runs()
    assert doc.status is RunStatus.CANCELLED and doc.failure_code == "CANCELLED"
    assert sig.name in (doc.error or "")
    cp = store.load_checkpoint(doc.id)
    assert cp.restart_node == "slow" and cp.anchor_reason.value == "cancel"
    assert labels(store, doc.id)[-3:] == ["nodes:first:0", "pre:slow:0", "fail:slow:0"]
    assert events(store, doc.id, "run_cancelled")
    assert not (ws / "after.txt").exists()
    # the cancelled run resumes from the node it was executing
    (ws / "child.pid").unlink()
    bot.write_text(bot.read_text().replace("sleep 60 & echo $! > child.pid; echo started > slow.started; wait",
                                           "echo quick"))
    from iterion.engine.resume import ResumeOptions, resume_run
    r = resume_run(store, doc.id, ResumeOptions(force=True, watch=False))
    assert r.status is RunStatus.FINISHED and (ws / "after.txt").exists()


def test_sigkill_mid_node_leaves_the_store_intact(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    store_dir = tmp_path / "store"
    proc = _start(bot, ws, store_dir)
    wait_for_file(ws / "slow.started", proc)
    child = int((ws / "child.pid").read_text())
    proc.kill()
    proc.communicate(timeout=30)
    try:
        os.killpg(os.getpgid(child), signal.SIGKILL)  # the orphaned tool group (its parent died)
    except ProcessLookupError:
        pass
    store = Store(store_dir)
    (doc,) = store.list_runs()  # run.json parses
    assert doc.status is RunStatus.RUNNING  # nobody could record anything else
    cp = store.load_checkpoint(doc.id)  # checkpoint parses ...
    assert cp.restart_node == "slow"     # ... and names the last completed boundary
    assert [(e.node, e.iteration) for e in cp.executed] == [("first", 0)]
    evs = store.read_events(doc.id)      # every event line parses
    assert evs[-1].type in ("node_started", "boundary_written")
    assert labels(store, doc.id)[-1] == "pre:slow:0"
    for line in store.paths(doc.id).events_jsonl.read_text().splitlines():
        json.loads(line)
    leftovers = [p for p in store.run_dir(doc.id).rglob("*") if is_temp_leftover(p)]
    assert leftovers == []
    assert not store.is_locked(doc.id)  # the flock died with its owner


# every branch writes a marker, then waits on a long child; `wide` queues branches behind
# max_parallel_branches, `inner` nests a fan-out, `think` is a slow LLM call (script backend)
FAN_OUT = """
router spread:
  mode: fan_out_all

router inner:
  mode: fan_out_all

tool deep_a:
  command: "sleep 600 & echo $! > deep_a.pid; touch deep_a.started; wait"

tool deep_b:
  command: "sleep 600 & echo $! > deep_b.pid; touch deep_b.started; wait"

tool wide:
  command: "sleep 600 & echo $! > wide.pid; touch wide.started; wait"

agent think:
  model: "m"
  backend: "script"

tool queued:
  command: "touch queued.ran"

tool join:
  command: "touch join.ran"

workflow spread_out:
  entry: spread
  budget:
    max_parallel_branches: 3
  spread -> inner
  spread -> wide
  spread -> think
  spread -> queued
  inner -> deep_a
  inner -> deep_b
  deep_a -> join
  deep_b -> join
  wide -> join
  think -> join
  queued -> join
  join -> done
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_a_fan_out_promptly_and_parks_it_on_the_router(tmp_path: Path, ws: Path,
                                                                    sig: signal.Signals) -> None:
    """Issue 28: a run inside a (nested) fan-out stops on SIGTERM/SIGINT, every branch's tools
    killed, queued branches never started, the checkpoint anchored on the router (the whole
    fan-out replays on resume: resume-and-rewind.md, "Subbots and parallel branches")."""
    bot = write_bot(tmp_path / "src", FAN_OUT, {"think": {"*": {"output": {}, "sleep_s": 600}}})
    store_dir = tmp_path / "store"
    proc = _start(bot, ws, store_dir)
    for marker in ("deep_a", "deep_b", "wide"):
        wait_for_file(ws / f"{marker}.started", proc)
    children = [int((ws / f"{m}.pid").read_text()) for m in ("deep_a", "deep_b", "wide")]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)  # the children sleep 600 s: only a prompt stop ends in time
    assert proc.returncode == 6, err
    deadline = time.monotonic() + 10
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(c) for c in children), "a branch's tool survived the cancel"
    store = Store(store_dir)
    (doc,) = store.list_runs()
    assert doc.status is RunStatus.CANCELLED and sig.name in (doc.error or "")
    cp = store.load_checkpoint(doc.id)
    assert cp.restart_node == "spread" and cp.anchor_reason.value == "cancel"
    assert not (ws / "queued.ran").exists() and not (ws / "join.ran").exists()
    started = [e.payload["to"] for e in events(store, doc.id, "branch_started")]
    assert "queued" not in started  # it waited for a slot the cancel never gave it
    assert events(store, doc.id, "run_cancelled")


ONE_AGENT = """
agent think:
  model: "m"
  backend: "script"

workflow ponder:
  entry: think
  think -> done
"""


@pytest.mark.parametrize("state", ["llm_call", "retry_backoff"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_a_run_waiting_on_a_model_or_a_retry(tmp_path: Path, ws: Path, sig: signal.Signals,
                                                          state: str) -> None:
    """Issue 28: the other engine states a run waits in - a slow model call on the main path, the
    backoff before an in-run retry (the provider asked for 100 s) - end on the signal at once."""
    if state == "llm_call":
        script = {"think": {"*": {"output": {}, "sleep_s": 600}}}
        marker = "node_started"
    else:
        script = {"think": {"*": {"attempts": [
            {"error": {"code": "RATE_LIMITED", "message": "slow down", "retry_after_s": 100}}, {"output": {}}]}}}
        marker = "node_retry_scheduled"
    bot = write_bot(tmp_path / "src", ONE_AGENT, script)
    store_dir = tmp_path / "store"
    proc = _start(bot, ws, store_dir)
    deadline = time.monotonic() + 60
    while True:  # until the run is in the state under test
        runs = Store(store_dir).list_runs() if (store_dir / "runs").exists() else []
        if runs and events(Store(store_dir), runs[0].id, marker):
            break
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.2)  # inside the call or the wait
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)  # the call sleeps 600 s, the backoff 100 s
    assert proc.returncode == 6, err
    store = Store(store_dir)
    (doc,) = store.list_runs()
    assert doc.status is RunStatus.CANCELLED and sig.name in (doc.error or "")
    assert store.load_checkpoint(doc.id).restart_node == "think"
