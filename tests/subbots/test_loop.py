"""A subbot node on a loop: each pass launches a child of its own (the finished child of an
earlier pass is not this pass's answer), and a parent killed after a pass's child finished
reattaches that pass's child, not a new one and not an earlier one."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.conftest import cli_json, run_cli
from tests.subbots.conftest import run_docs

ECHO = '''vars:
  task: string
compute wrap:
  expr:
    task: "vars.task"
workflow echo:
  entry: wrap
  wrap -> done
'''

LOOPING = '''subbot kid:
  source: "bots/echo.bot"
  with:
    task: "pass {{loop.again.iteration}}"
compute check:
  expr:
    seen: "outputs.kid.task"
workflow parent:
  entry: kid
  kid -> check
  check -> kid when "outputs.check.seen != ''" as again(2)
  check -> done
'''


def _looping(project: Path) -> None:
    (project / "bots" / "echo.bot").write_text(ECHO)
    (project / "parent.bot").write_text(LOOPING)


def _children(project: Path, parent: str) -> list[dict]:
    return sorted((d for d in run_docs(project).values() if d.get("parent_run") == parent),
                  key=lambda d: d["parent_iteration"])


def test_each_pass_of_a_loop_launches_its_own_child(project: Path) -> None:
    _looping(project)
    out = cli_json("run", "parent.bot", cwd=project)
    assert out["status"] == "finished", out
    assert out["outputs"]["check"] == {"seen": "pass 2"}  # the last pass's child answered it
    kids = _children(project, out["run_id"])
    assert [(k["parent_iteration"], k["status"]) for k in kids] == [(0, "finished"), (1, "finished"),
                                                                     (2, "finished")]
    assert len({k["id"] for k in kids}) == 3
    # the parent points at the newest pass's child
    assert run_docs(project)[out["run_id"]]["subbot_children"] == {"kid": kids[-1]["id"]}


def test_a_kill_after_the_second_pass_child_finished_reattaches_that_child(project: Path) -> None:
    _looping(project)
    # the second passage through the point: pass 1's child has finished, the parent has not
    # recorded the node's output yet
    proc = run_cli("run", "parent.bot", cwd=project, env={"ITERION_TEST_KILL_AT": "subbot-child-stopped:2"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
    before = _children(project, parent)
    assert [(k["parent_iteration"], k["status"]) for k in before] == [(0, "finished"), (1, "finished")]
    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    assert done["outputs"]["check"] == {"seen": "pass 2"}
    after = _children(project, parent)
    # pass 1 was not relaunched: its child was reattached; pass 2 got its own
    assert [k["id"] for k in after[:2]] == [k["id"] for k in before]
    assert [(k["parent_iteration"], k["status"]) for k in after] == [(0, "finished"), (1, "finished"),
                                                                    (2, "finished")]
