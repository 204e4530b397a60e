"""A tool ends when its shell ends; background children it left are reported, then killed.

`sleep 600 & echo started` used to hold the node until the sleep exited (its stdout pipe stayed
open). Now the node finishes with the shell's output, a `tool_children_left` event names the
children, and after the grace (``$ITERION_TOOL_CHILD_GRACE_S``, default 2 s) the process group
is killed. The sleeps are long on purpose: a node that waited for them would hit the
subprocess timeout, so the run finishing at all proves the node did not wait.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from .conftest import events, only_run, outputs, run_cli, write_bot

BACKGROUND = """
    tool start:
      command: "sleep 600 & echo $! > child.pid; echo started"

    tool after:
      command: "echo after"

    workflow w:
      entry: start
      start -> after
      after -> done
"""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def _children_events(store: Path, run_id: str) -> list[dict[str, object]]:
    return [e for e in events(store, run_id) if e["type"] == "tool_children_left"]


def test_a_background_child_does_not_hold_the_node_and_is_killed_after_the_grace(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", BACKGROUND)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=120)
    assert p.returncode == 0, p.stderr
    child = int((ws / "child.pid").read_text())
    run_id = only_run(store)
    out = outputs(store, run_id)
    assert out["start"]["stdout"] == "started\n" and out["after"]["stdout"] == "after\n"
    (event,) = _children_events(store, run_id)
    assert event["node"] == "start"
    assert event["payload"] == {"pids": [child], "count": 1, "action": "killed", "grace_s": 2.0, "killed": [child]}
    kinds = [e["type"] for e in events(store, run_id) if e["node"] == "start"]
    assert kinds.index("tool_children_left") < kinds.index("node_finished")  # on the node's own timeline
    assert not alive(child)


def test_keep_policy_reports_the_child_and_leaves_it_running(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", BACKGROUND)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=120,
                env={"ITERION_TOOL_CHILD_GRACE_S": "keep"})
    assert p.returncode == 0, p.stderr
    child = int((ws / "child.pid").read_text())
    try:
        (event,) = _children_events(store, only_run(store))
        assert event["payload"] == {"pids": [child], "count": 1, "action": "kept", "grace_s": None, "killed": []}
        assert alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_child_that_ends_within_the_grace_finishes_its_work(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool start:
          command: "(sleep 0.3; echo late > late.txt) & echo started"

        workflow w:
          entry: start
          start -> done
    """)
    store = tmp_path / "store"
    # a grace far above the child's 0.3 s, so a loaded machine cannot turn this into a kill
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=120,
                env={"ITERION_TOOL_CHILD_GRACE_S": "60"})
    assert p.returncode == 0, p.stderr
    assert (ws / "late.txt").read_text() == "late\n"
    (event,) = _children_events(store, only_run(store))
    assert event["payload"]["action"] == "exited" and event["payload"]["killed"] == []
    assert event["payload"]["count"] >= 1


def test_a_tool_without_background_children_has_no_event(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool start:
          command: "sleep 0.1 & wait; echo waited"

        workflow w:
          entry: start
          start -> done
    """)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=120)
    assert p.returncode == 0, p.stderr
    assert _children_events(store, only_run(store)) == []


def test_a_bad_grace_setting_fails_the_tool_with_one_clear_line(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool start:
          command: "echo started > started.txt"

        workflow w:
          entry: start
          start -> done
    """)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, timeout=120,
                env={"ITERION_TOOL_CHILD_GRACE_S": "soon"})
    assert p.returncode == 5, p.stderr  # failed_resumable: fix the setting, then resume
    assert "ITERION_TOOL_CHILD_GRACE_S='soon'" in p.stderr and "Traceback" not in p.stderr
    assert not (ws / "started.txt").exists()  # refused before the command started
    doc = json.loads((store / "runs" / only_run(store) / "run.json").read_text())
    assert doc["status"] == "failed_resumable"
