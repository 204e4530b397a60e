"""Crashes around checkpoint pushes: a process SIGKILLed in the middle of a push loses neither the
last success record nor the run; a run whose process died mid-node is banked when found dead."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from iterion.engine.stale import reconcile_orphans
from iterion.store import RunStatus, Store
from iterion.store import events as ev
from iterion.workspace_checkpoint import recovery_hint

from .conftest import git, index_digest, run_cli, start_cli, wait_for_file, write_bot

TIMEOUT = 90.0


def _start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return start_cli(*args, cwd=cwd, start_new_session=True)


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    wait_for_file(path, proc, limit=TIMEOUT)


def _only_run(store_dir: Path) -> str:
    (doc,) = Store(store_dir).list_runs()
    return doc.id


def test_sigkill_during_a_push_keeps_the_last_success_and_the_run_resumes(
        tmp_path: Path, ws: Path, origin: Path) -> None:
    slow, entered, once = tmp_path / "slow", tmp_path / "entered", tmp_path / "once"
    hook = origin / "hooks" / "pre-receive"
    # the first push after node two (only that one: the re-executed node does not re-arm it) hangs
    hook.write_text(f"#!/bin/sh\nif [ -f '{slow}' ]; then rm -f '{slow}'; touch '{entered}'; sleep 60; fi\nexit 0\n")
    hook.chmod(0o755)
    bot = write_bot(tmp_path / "src", f"""
        tool one:
          command: "echo one > one.txt"

        tool two:
          command: "echo two > two.txt && if [ ! -f '{once}' ]; then touch '{once}' '{slow}'; fi"

        tool three:
          command: "echo three > three.txt"

        workflow w:
          entry: one
          one -> two
          two -> three
          three -> done
    """)
    store_dir = tmp_path / "store"
    index0 = index_digest(ws)
    proc = _start("run", str(bot), "--push-checkpoints", "origin", "--push-every", "1",
                  "--store-dir", str(store_dir), cwd=ws)
    _wait_for(entered, proc)  # the push after node two is inside the remote's hook
    os.killpg(proc.pid, signal.SIGKILL)  # the run, its git push and the remote side of it
    proc.communicate(timeout=TIMEOUT)

    store = Store(store_dir)
    run_id = _only_run(store_dir)
    assert store.load_run(run_id).status is RunStatus.RUNNING  # killed: nothing recorded on the way out
    first = recovery_hint(store, run_id)
    assert first is not None and first["ref"] == f"refs/iterion/runs/{run_id}/checkpoints/1"
    assert git(origin, "rev-parse", first["ref"]).strip() == first["commit"]

    done = run_cli("resume", "--run-id", run_id, "--store-dir", str(store_dir), "--json", cwd=ws)
    assert done.returncode == 0, done.stderr  # its dead owner is taken over; the run finishes
    assert json.loads(done.stdout)["status"] == "finished"
    assert (ws / "three.txt").read_text() == "three\n"
    pushes = [e for e in store.read_events(run_id) if e.type == ev.RUN_WORKSPACE_CHECKPOINT]
    assert pushes[0].payload["ref"] == first["ref"]  # the first success is still on the timeline
    last = recovery_hint(store, run_id)
    assert last is not None and last["seq"] > first["seq"]
    # the interrupted number is pushed again (forced), or a later one: the ref holds the recorded commit
    assert git(origin, "rev-parse", last["ref"]).strip() == last["commit"]
    assert git(origin, "show", f"{last['commit']}:three.txt") == "three\n"
    assert index_digest(ws) == index0


def test_a_worktree_run_found_dead_is_banked_and_pushed(tmp_path: Path, ws: Path, origin: Path) -> None:
    started, tool_pid = tmp_path / "started", tmp_path / "tool.pid"
    bot = write_bot(tmp_path / "src", f"""
        tool make:
          command: "echo made > made.txt"

        tool slow:
          command: "echo $$ > '{tool_pid}' && echo partial > partial.txt && touch '{started}' && sleep 60"

        workflow w:
          entry: make
          worktree: auto
          make -> slow
          slow -> done
    """)
    store_dir = tmp_path / "store"
    proc = _start("run", str(bot), "--push-checkpoints", "origin", "--store-dir", str(store_dir), cwd=ws)
    _wait_for(started, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    try:
        os.killpg(int(tool_pid.read_text()), signal.SIGKILL)  # a tool runs in its own session
    except ProcessLookupError:
        pass

    store = Store(store_dir)
    run_id = _only_run(store_dir)
    (promoted,) = reconcile_orphans(store)  # its owner is provably dead: promoted at once
    assert promoted.run_id == run_id and promoted.status == "failed_resumable"
    doc = store.load_run(run_id)
    assert doc.worktree is not None and doc.final_branch == doc.worktree.branch
    assert git(ws, "rev-parse", doc.final_branch).strip() == doc.final_commit
    assert git(ws, "show", f"{doc.final_commit}:partial.txt") == "partial\n"  # the dead node's debris, banked
    hint = recovery_hint(store, run_id)
    assert hint is not None and hint["commit"] == doc.final_commit
    assert git(origin, "rev-parse", hint["ref"]).strip() == doc.final_commit
