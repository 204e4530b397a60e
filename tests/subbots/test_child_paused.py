"""An operator pauses a subbot's child while it runs: the child parks ``paused_operator`` at its
next node boundary, and the parent parks ``paused_operator`` too (a pause, not a failure: no
failure code); resuming the parent resumes the same child and finishes both."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli_json, run_cli, start_cli, wait_for_file
from tests.subbots.conftest import run_docs

WAITING_CHILD = '''vars:
  task: string
tool wait:
  command: "touch started.flag; while [ ! -f go.flag ]; do sleep 0.05; done"
compute wrap:
  expr:
    approved: "true"
    task: "vars.task"
workflow child:
  entry: wait
  wait -> wrap
  wrap -> done
'''


def test_a_paused_child_parks_the_parent_and_one_resume_finishes_both(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(WAITING_CHILD)
    proc = start_cli("run", "parent.bot", "--json", cwd=project)
    try:
        wait_for_file(project / "started.flag", proc)
        parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
        child = run_docs(project)[parent]["subbot_children"]["kid"]
        asked = run_cli("pause", "--run-id", child, "--wait", "0", cwd=project)
        assert "requested" in asked.stdout, (asked.returncode, asked.stdout, asked.stderr)  # --wait 0: asked only
        (project / "go.flag").touch()  # the child's node finishes; its next boundary takes the pause
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    docs = run_docs(project)
    assert docs[child]["status"] == "paused_operator", docs[child]
    assert docs[parent]["status"] == "paused_operator", (docs[parent], err)
    assert docs[parent]["failure_code"] is None  # a pause: nothing failed
    events = cli_json("inspect", "--run-id", parent, "--events", "--all", cwd=project)["events"]
    paused = [e for e in events if e["type"] == "run_paused"]
    assert paused and paused[-1]["payload"]["by"] == "subbot", paused
    assert paused[-1]["payload"]["child_run"] == child
    assert not [e for e in events if e["type"] == "node_failed"], "the paused child was reported as a failure"

    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    assert done["outputs"]["after"] == {"seen": True, "task": "write docs"}
    docs = run_docs(project)
    assert docs[parent]["subbot_children"] == {"kid": child}  # the same child, resumed
    assert docs[child]["status"] == "finished"
    assert len(docs) == 2


def test_pausing_the_parent_pauses_its_running_child_at_the_childs_next_boundary(project: Path) -> None:
    """`iterion pause` of the parent is passed on to the child: without it the pause would wait
    for the whole child workflow (the parent's next node boundary comes after it)."""
    (project / "bots" / "child.bot").write_text(WAITING_CHILD)
    proc = start_cli("run", "parent.bot", "--json", cwd=project)
    try:
        wait_for_file(project / "started.flag", proc)
        parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
        child = run_docs(project)[parent]["subbot_children"]["kid"]
        asked = run_cli("pause", "--run-id", parent, "--wait", "0", cwd=project)
        assert "requested" in asked.stdout, (asked.returncode, asked.stdout, asked.stderr)
        # the relay writes the child's request within its poll; then the child's node may finish
        wait_for_file(project / ".git" / "iterion" / "store" / "runs" / child / "control.json", proc)
        (project / "go.flag").touch()
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    docs = run_docs(project)
    assert (docs[parent]["status"], docs[child]["status"]) == ("paused_operator", "paused_operator")
    # the parent's request was honoured: nothing is left to pause its resume at the first boundary
    assert not (project / ".git" / "iterion" / "store" / "runs" / parent / "control.json").exists()
    out = cli_json("inspect", "--run-id", child, "--events", "--all", cwd=project)["events"]
    wrap = [e for e in out if e["type"] == "node_started" and e["node"] == "wrap"]
    assert not wrap, "the child ran past the boundary the pause was for"
    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    docs = run_docs(project)
    assert docs[child]["status"] == "finished" and len(docs) == 2
