"""Randomized crash test: SIGKILL a run at random points, resume it, get an uninterrupted run's result.

Each trial forks this (already warmed-up) interpreter to launch the run, so a trial costs
milliseconds instead of a fresh `iterion` process start; the kill is a real SIGKILL of a real
process holding the run's flock. The resume alternates between the spec's two recoveries of an
orphaned `running` run: ``--force-stale`` takeover, and start-up promotion to failed_resumable
followed by an ordinary resume. The 60-second staleness window is shortened with
``ITERION_STALE_AFTER_S`` (the test-only override documented in iterion/engine/stale.py).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.engine.stale import promote_if_orphaned
from iterion.store import RunStatus, Store
from iterion.store.ids import new_id

from .conftest import write_bot

TRIALS = 50
SEED = 20261202

# idempotent tools: each output depends only on its inputs, files are replaced atomically
CHAIN = """
schema num:
  n: int

tool a:
  command: "echo A > a.tmp && mv a.tmp a.txt && echo alpha"

tool b:
  command: "echo {{outputs.a.stdout}}-B > b.tmp && mv b.tmp b.txt && echo beta"

compute c:
  output: num
  expr:
    n: "2 + 3"

tool d:
  command: "echo {{outputs.b.stdout}}{{outputs.c.n}} > d.tmp && mv d.tmp d.txt && echo delta"

tool e:
  command: "cat a.txt b.txt d.txt > e.tmp && mv e.tmp e.txt && echo epsilon"

workflow chain:
  entry: a
  a -> b
  b -> c
  c -> d
  d -> e
  e -> done
"""

FILES = ("a.txt", "b.txt", "d.txt", "e.txt")


def _launch_in_child(store_root: Path, bot: Path, ws: Path, run_id: str) -> int:
    pid = os.fork()
    if pid == 0:  # the child: execute the run, never return into pytest
        code = 0
        try:
            launch_run(Store(store_root), bot, LaunchOptions(workspace=ws, watch=False, run_id=run_id))
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    return pid


def _holds(entry: Path, marker: bytes, lock: str) -> bool:
    try:
        if marker in (entry / "environ").read_bytes().split(b"\0"):
            return True
        return any(os.readlink(fd) == lock for fd in (entry / "fd").iterdir())
    except OSError:
        return False


def _kill_leftovers(store: Store, run_id: str) -> None:
    """SIGKILL what the dead run left behind: its tools (ITERION_RUN_ID in their environment) and a
    process forked but not yet exec'd, which still holds the run's lock fd; wait for the lock."""
    marker = f"ITERION_RUN_ID={run_id}".encode()
    lock = str(store.lock(run_id).path)
    deadline = time.monotonic() + 10
    while True:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid() and _holds(entry, marker, lock):
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass
        if not store.exists(run_id) or not store.is_locked(run_id) or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _workspace_state(ws: Path) -> dict[str, str | None]:
    return {name: (ws / name).read_text() if (ws / name).exists() else None for name in FILES}


def _timed_child(store_root: Path, bot: Path, ws: Path) -> float:
    start = time.monotonic()
    pid = _launch_in_child(store_root, bot, ws, new_id())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return time.monotonic() - start


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when there is one: 50 trials of fsync-heavy runs stay fast (still real files)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    root = Path(tempfile.mkdtemp(prefix="iterion-crash-", dir=shm))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.heavy  # SIGKILLs at seeded random points of a long chain: the heavy tier (.ci/run)
def test_sigkill_at_random_points_then_resume_equals_an_uninterrupted_run(
        fast_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = fast_dir
    monkeypatch.setenv("ITERION_STALE_AFTER_S", "0")
    bot = write_bot(tmp_path / "src", CHAIN)
    # the baseline, in this process (it also imports everything the forked children use)
    base_ws = tmp_path / "base-ws"
    base_ws.mkdir()
    base_store = Store(tmp_path / "base-store")
    baseline = launch_run(base_store, bot, LaunchOptions(workspace=base_ws, watch=False))
    assert baseline.status is RunStatus.FINISHED, baseline.error
    expected_files = _workspace_state(base_ws)
    span = max(_timed_child(tmp_path / "base-store", bot, base_ws) for _ in range(2))

    rng = random.Random(SEED)
    outcomes: dict[str, int] = {}

    def mid_run_kills() -> int:
        return sum(n for k, n in outcomes.items() if "resumed" in k or "taken over" in k)

    # At least TRIALS trials, and at least half of TRIALS kills that landed mid-run: on a loaded
    # machine the measured span overestimates a run, so kills that land after the finish shrink
    # the window and buy another trial (bounded), instead of the test depending on the load.
    trial = -1
    while trial + 1 < TRIALS or (mid_run_kills() < TRIALS // 2 and trial + 1 < 3 * TRIALS):
        trial += 1
        ws = tmp_path / f"ws-{trial}"
        ws.mkdir()
        store_root = tmp_path / f"store-{trial}"
        run_id = new_id()
        pid = _launch_in_child(store_root, bot, ws, run_id)
        time.sleep(rng.uniform(0, span))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        store = Store(store_root)
        _kill_leftovers(store, run_id)
        if not store.exists(run_id):
            outcome = "killed before the run existed"
            result = launch_run(store, bot, LaunchOptions(workspace=ws, watch=False, run_id=run_id))
        else:
            doc = store.load_run(run_id)
            if doc.status is RunStatus.FINISHED:
                outcome = "finished before the kill"
                result = None
                span *= 0.8
            else:
                assert doc.status is RunStatus.RUNNING, (trial, doc.status, doc.error)
                promoted = promote_if_orphaned(store, run_id) if trial % 2 else None
                if promoted is not None and promoted.status == RunStatus.FAILED_RESUMABLE.value:
                    outcome = "promoted, then resumed"
                    assert store.load_run(run_id).failure_code == "ORPHANED_RUN"
                    result = resume_run(store, run_id, ResumeOptions(watch=False))
                else:
                    # no checkpoint yet (promotion would end it failed) or an even trial: take it over
                    outcome = "taken over with --force-stale"
                    if promoted is not None:
                        outcome = "promoted to failed (no checkpoint)"
                        assert store.load_run(run_id).status is RunStatus.FAILED
                        result = None
                    else:
                        result = resume_run(store, run_id, ResumeOptions(watch=False, force_stale=True))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome == "promoted to failed (no checkpoint)":
            continue  # the spec's verdict for a run with nothing to resume from
        if result is not None:
            assert result.status is RunStatus.FINISHED, (trial, outcome, result.failure_code, result.error)
        final = store.load_checkpoint(run_id)
        assert final is not None and final.outputs == baseline.outputs, (trial, outcome)
        assert store.load_run(run_id).status is RunStatus.FINISHED
        assert _workspace_state(ws) == expected_files, (trial, outcome)
        # no completed node ran twice: every node appears once per boundary it completed
        nodes = [e.node for e in final.executed]
        assert sorted(nodes) == sorted(["a", "b", "c", "d", "e"]), (trial, outcome, nodes)
    assert trial + 1 >= TRIALS
    assert mid_run_kills() >= TRIALS // 2, outcomes  # most kills really did land mid-run
    print(f"\ncrash outcomes over {trial + 1} trials (span {span:.3f}s): {outcomes}")
