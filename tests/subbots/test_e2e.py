"""End to end, through the CLI in real subprocesses: a parent whose subbot child parks at a
human gate; answers through the parent; SIGKILL and reattach; rewind of the subbot node."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.conftest import cli_json, kill_process, run_cli, start_cli, wait_for_file
from tests.subbots.conftest import run_docs


def _child_of(project: Path, parent: str) -> dict:
    docs = run_docs(project)
    child_id = docs[parent]["subbot_children"]["kid"]
    return docs[child_id]


def test_the_child_parks_and_answering_through_the_parent_finishes_both(project: Path) -> None:
    out = cli_json("run", "parent.bot", cwd=project)
    assert out["status"] == "paused_waiting_human", out
    parent = out["run_id"]
    # the child's question is the parent's, with where it comes from
    assert out["pending"]["instructions"] == "Approve write docs?"
    assert [f["name"] for f in out["pending"]["fields"]] == ["ok"]
    child = _child_of(project, parent)
    assert out["pending"]["subbot"] == {"child_run": child["id"], "node": "gate"}
    assert child["status"] == "paused_waiting_human"
    assert (child["parent_run"], child["parent_node"]) == (parent, "kid")
    assert child["workspace_dir"] == str(project.resolve())  # the parent's workspace
    assert len(run_docs(project)) == 2

    done = cli_json("resume", "--run-id", parent, "--answer", "ok=true", cwd=project)
    assert done["status"] == "finished", done
    assert done["outputs"]["after"] == {"seen": True, "task": "write docs"}
    docs = run_docs(project)
    assert docs[child["id"]]["status"] == "finished"
    assert docs[parent]["subbot_children"] == {"kid": child["id"]}
    assert len(docs) == 2  # the resume continued the same child
    # inspect shows the tree both ways
    tree = cli_json("inspect", "--run-id", parent, cwd=project)
    assert tree["parent"] is None
    assert tree["subbot_children"] == [{"node": "kid", "run": child["id"], "name": child["name"],
                                        "status": "finished", "children": []}]
    assert cli_json("inspect", "--run-id", child["id"], cwd=project)["parent"] == {"run": parent, "node": "kid"}
    text = run_cli("inspect", "--run-id", parent, cwd=project).stdout
    assert f"kid -> {child['id']} ({child['name']}) finished" in text


def test_a_failed_child_fails_the_node_with_its_code(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(
        'vars:\n  task: string\nfail nope:\n  code: CHILD_REFUSED\n  message: "no {{vars.task}}"\n'
        'workflow child:\n  entry: nope\n')
    out = cli_json("run", "parent.bot", cwd=project)
    assert out["status"] in ("failed", "failed_resumable"), out
    assert out["failure_code"] == "CHILD_REFUSED"
    assert _child_of(project, out["run_id"])["failure_code"] == "CHILD_REFUSED"


SLOW_CHILD = '''vars:
  task: string
schema answer:
  ok: bool
human gate:
  instructions: "Approve {{vars.task}}?"
  output: answer
tool slow:
  command: "if [ -f started.flag ]; then echo again > resumed.flag; else touch started.flag; sleep 120; fi"
compute wrap:
  expr:
    approved: "outputs.gate.ok"
    task: "vars.task"
workflow child:
  entry: gate
  gate -> slow
  slow -> wrap
  wrap -> done
'''


def test_sigkill_of_the_parent_then_resume_reattaches_the_same_child(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(SLOW_CHILD)
    out = cli_json("run", "parent.bot", cwd=project)
    parent = out["run_id"]
    child_id = _child_of(project, parent)["id"]
    # the answer resumes the child, which then runs a slow tool: the parent is killed there
    proc = start_cli("resume", "--run-id", parent, "--answer", "ok=true", cwd=project, start_new_session=True)
    wait_for_file(project / "started.flag", proc)
    kill_process(proc)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    docs = run_docs(project)
    assert docs[parent]["status"] == "running" and docs[child_id]["status"] == "running"

    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    assert (project / "resumed.flag").exists()  # the same child continued at its slow node
    docs = run_docs(project)
    assert docs[parent]["subbot_children"] == {"kid": child_id}
    assert docs[child_id]["status"] == "finished"
    assert len(docs) == 2, "a second child was launched"
    assert done["outputs"]["after"]["seen"] is True


def test_sigkill_with_the_child_parked_then_resume_asks_the_same_child_again(project: Path) -> None:
    """The parent dies after recording its child and before its own park: a takeover resume
    reattaches the parked child (its question again), and the answer finishes both."""
    proc = run_cli("run", "parent.bot", cwd=project, env={"ITERION_TEST_KILL_AT": "subbot-child-stopped:1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
    child_id = _child_of(project, parent)["id"]
    assert run_docs(project)[child_id]["status"] == "paused_waiting_human"
    assert run_docs(project)[parent]["status"] == "running"
    again = cli_json("resume", "--run-id", parent, cwd=project)
    assert again["status"] == "paused_waiting_human", again
    assert again["pending"]["subbot"]["child_run"] == child_id
    done = cli_json("resume", "--run-id", parent, "--answer", "ok=false", cwd=project)
    assert done["status"] == "finished", done
    assert done["outputs"]["after"]["seen"] is False
    assert len(run_docs(project)) == 2


def test_rewind_of_the_subbot_node_orphans_the_child_and_the_replay_sees_the_edit(project: Path) -> None:
    text = (project / "parent.bot").read_text().replace(
        "  after -> done\n", "  after -> confirm\n  confirm -> done\n") + \
        'schema yes:\n  go: bool\nhuman confirm:\n  instructions: "go?"\n  output: yes\n'
    (project / "parent.bot").write_text(text)
    parent = cli_json("run", "parent.bot", cwd=project)["run_id"]
    parked = cli_json("resume", "--run-id", parent, "--answer", "ok=true", cwd=project)
    assert parked["pending"]["node"] == "confirm", parked
    old_child = _child_of(project, parent)["id"]
    child = (project / "bots" / "child.bot").read_text()
    (project / "bots" / "child.bot").write_text(child.replace('    task: "vars.task"\n',
                                                              '    task: "vars.task"\n    edited: "true"\n'))

    rewound = cli_json("rewind", "--run-id", parent, "--node", "kid", "--restore-scope", "none", cwd=project)
    assert rewound["orphaned_child_runs"] == {"kid": old_child}, rewound
    assert run_docs(project)[parent]["subbot_children"] == {}
    assert run_docs(project)[old_child]["status"] == "finished"  # left alone

    replay = cli_json("resume", "--run-id", parent, cwd=project)
    assert replay["status"] == "paused_waiting_human", replay
    new_child = _child_of(project, parent)["id"]
    assert new_child != old_child
    assert replay["pending"]["subbot"]["child_run"] == new_child
    parked = cli_json("resume", "--run-id", parent, "--answer", "ok=true", cwd=project)
    assert parked["pending"]["node"] == "confirm", parked
    assert parked["outputs"]["kid"]["edited"] is True  # the edited child workflow ran
    done = cli_json("resume", "--run-id", parent, "--answer", "go=true", cwd=project)
    assert done["status"] == "finished"
    assert run_docs(project)[new_child]["parent_run"] == parent
    assert [c["run"] for c in cli_json("inspect", "--run-id", parent, cwd=project)["subbot_children"]] == [new_child]


def test_cancelling_the_parent_cancels_the_child_and_a_resume_continues_it(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(
        'vars:\n  task: string\n' + SLOW_CHILD[SLOW_CHILD.index("tool slow:"):SLOW_CHILD.index("compute wrap:")]
        + 'compute wrap:\n  expr:\n    approved: "true"\n    task: "vars.task"\n'
        'workflow child:\n  entry: slow\n  slow -> wrap\n  wrap -> done\n')
    proc = start_cli("run", "parent.bot", cwd=project, start_new_session=True)
    try:
        wait_for_file(project / "started.flag", proc)
        parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
        child_id = run_docs(project)[parent]["subbot_children"]["kid"]
        cancel = run_cli("cancel", "--run-id", parent, cwd=project)
        assert cancel.returncode == 0, cancel.stderr
        proc.wait(timeout=60)
    finally:
        kill_process(proc)
    docs = run_docs(project)
    assert docs[parent]["status"] == "cancelled"
    assert docs[child_id]["status"] == "cancelled"  # relayed: no child left burning
    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    assert (project / "resumed.flag").exists()
    assert len(run_docs(project)) == 2  # the cancelled child was resumed, not replaced


def test_an_answer_the_child_gate_refuses_is_refused_up_front(project: Path) -> None:
    parent = cli_json("run", "parent.bot", cwd=project)["run_id"]
    bad = run_cli("resume", "--run-id", parent, "--answer", "ok=maybe", cwd=project)
    assert bad.returncode != 0
    assert "'maybe' is not a bool" in bad.stderr
    docs = run_docs(project)
    assert docs[parent]["status"] == "paused_waiting_human"  # nothing moved
    assert docs[docs[parent]["subbot_children"]["kid"]]["status"] == "paused_waiting_human"
    assert cli_json("resume", "--run-id", parent, "--answer", "ok=true", cwd=project)["status"] == "finished"
