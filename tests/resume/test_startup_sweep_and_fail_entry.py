"""Through the CLI: the start-up orphan sweep (a SIGKILLed run is promoted when a command opens
the store, then resumed), and a named fail node as the workflow's entry."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from iterion.store import RunStatus, Store

from .conftest import cli, cli_json, events, only_run, start_cli, wait_for_file, write_bot
from .test_resume_status_rows import SLOW, _lines

STALE_NOW = {"ITERION_STALE_AFTER_S": "0"}  # the test-only grace window override (engine/stale.py)


def test_a_sigkilled_run_is_promoted_by_inspect_then_resume_continues_it(tmp_path: Path, ws: Path,
                                                                        store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    proc = start_cli("run", str(bot), cwd=ws, store=store_dir)
    wait_for_file(ws / "slow.started", proc)
    rid = only_run(store_dir)
    live = cli("inspect", "--run-id", rid, "--json", cwd=ws, store=store_dir, env=STALE_NOW)
    assert live.returncode == 0 and "promoted" not in live.stderr  # a live owner holds the lock
    assert Store(store_dir).load_run(rid).status is RunStatus.RUNNING
    proc.kill()  # SIGKILL mid-node: nothing recorded on the way out
    proc.communicate(timeout=30)
    os.killpg(os.getpgid(int((ws / "slow.pid").read_text())), signal.SIGKILL)  # its orphaned tool
    # recorded on another host: its death cannot be proven here, so the grace window applies (a
    # provably dead owner on this host is promoted at once: tests/faults/test_takeover_*.py)
    Store(store_dir).update_run(rid, lambda d: setattr(d.owner, "host", "another-host"))

    within = cli("inspect", cwd=ws, store=store_dir)  # the real 60 s window: just flushed, left alone
    assert within.returncode == 0 and "promoted" not in within.stderr
    assert Store(store_dir).load_run(rid).status is RunStatus.RUNNING

    swept = cli("inspect", "--run-id", rid, "--json", cwd=ws, store=store_dir, env=STALE_NOW)
    assert swept.returncode == 0, swept.stderr
    promoted_lines = [ln for ln in swept.stderr.splitlines() if "promoted" in ln]
    assert promoted_lines == [f"iterion: run {rid} was orphaned (its process is gone): promoted to "
                              "failed_resumable at slow"], swept.stderr
    shown = json.loads(swept.stdout)
    assert shown["status"] == "failed_resumable" and shown["failure_code"] == "ORPHANED_RUN"
    assert shown["checkpoint_node"] == "slow"
    assert events(store_dir, rid, "run_orphan_promoted")[0].payload["to_status"] == "failed_resumable"
    again = cli("inspect", cwd=ws, store=store_dir, env=STALE_NOW)
    assert "promoted" not in again.stderr  # once

    (ws / "go.flag").write_text("")
    rc, done = cli_json("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished", done
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)


FAIL_ENTRY = """
fail refuse:
  code: NOT_ACTIONABLE
  message: "nothing to do for {{vars.lot}}"
  resumable: {resumable}

workflow gatekeeper:
  entry: refuse
  vars:
    lot: string = "lot-7"
"""


def test_a_named_fail_node_as_entry_ends_failed_with_its_code_and_a_warning(tmp_path: Path, ws: Path,
                                                                           store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", FAIL_ENTRY.replace("{resumable}", "true"))
    p = cli("run", str(bot), cwd=ws, store=store_dir)
    assert p.returncode == 1 and "C008" not in p.stdout + p.stderr, p.stdout + p.stderr  # compiled, ran
    assert "fail node refuse is resumable but cannot be resumed" in p.stderr  # the WARN, on the console too
    rid = only_run(store_dir)
    doc = Store(store_dir).load_run(rid)
    assert doc.status is RunStatus.FAILED
    assert doc.failure_code == "NOT_ACTIONABLE" and doc.error == "nothing to do for lot-7"
    (warning,) = events(store_dir, rid, "warning")
    assert warning.node == "refuse" and warning.payload["node"] == "refuse"
    assert "workflow entry" in warning.payload["reason"]
    failed = events(store_dir, rid, "run_failed")[-1].payload
    assert failed["code"] == "NOT_ACTIONABLE" and failed["resumable"] is False

    terminal = write_bot(tmp_path / "src2", FAIL_ENTRY.replace("{resumable}", "false"))
    rc, run = cli_json("run", str(terminal), cwd=ws, store=store_dir)
    assert rc == 1 and run["status"] == "failed" and run["failure_code"] == "NOT_ACTIONABLE"
    assert not events(store_dir, run["run_id"], "warning")  # not resumable: nothing degraded, nothing to warn
