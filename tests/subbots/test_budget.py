"""A child's spending counts against its parent's caps."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import cli_json
from tests.subbots.conftest import run_docs

CHILD = '''vars:
  task: string
agent one:
  backend: script
  user: "{{vars.task}}"
agent two:
  backend: script
  user: "again"
workflow child:
  entry: one
  one -> two
  two -> done
'''
CHILD_SCRIPT = '''one: {"*": {text: "a", cost_usd: 0.03, tokens_in: 10, tokens_out: 5}}
two: {"*": {text: "b", cost_usd: 0.03, tokens_in: 10, tokens_out: 5}}
'''


def _parent(budget: str, after: str = "") -> str:
    return f'''subbot kid:
  source: "bots/child.bot"
  with: {{ task: "t" }}
{after}workflow parent:
  entry: kid
  budget:
    max_cost_usd: {budget}
  kid -> {"last" if after else "done"}
{"  last -> done" if after else ""}
'''


def test_the_child_is_launched_with_what_the_parent_has_left(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(CHILD)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("0.05"))
    out = cli_json("run", "p.bot", cwd=project)
    assert out["status"] == "failed_resumable", out
    assert out["failure_code"] == "BUDGET_EXCEEDED"
    child = run_docs(project)[run_docs(project)[out["run_id"]]["subbot_children"]["kid"]]
    assert child["budget"]["max_cost_usd"] == 0.05  # the parent's cap, as the child's own is none
    assert child["failure_code"] == "BUDGET_EXCEEDED"


def test_what_the_child_spent_is_charged_to_the_parent(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(CHILD)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("0.1", 'agent last:\n  backend: script\n  user: "x"\n'))
    (project / "p.script.yaml").write_text('last: {"*": {text: "c", cost_usd: 0.05}}\n')
    out = cli_json("run", "p.bot", cwd=project)
    # 0.06 by the child, then 0.05 by the parent's own node: over the parent's 0.1
    assert out["status"] == "failed_resumable", out
    assert out["failure_code"] == "BUDGET_EXCEEDED"
    detail = cli_json("inspect", "--run-id", out["run_id"], cwd=project)
    assert abs(detail["budget"]["consumed"]["cost_usd"] - 0.11) < 1e-9
    assert detail["budget"]["consumed"]["tokens"] == 30
