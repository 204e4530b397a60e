"""A child's spending counts against its parent's caps."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from iterion.failure_codes import FailureCode
from iterion.store.spend import FileSpendCounter
from tests.conftest import cli_json, kill_process, run_cli, start_cli, wait_for_file
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


def _events(project: Path, run_id: str) -> list[dict]:
    proc = run_cli("inspect", "--run-id", run_id, "--events", "--all", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    events: list[dict] = json.loads(proc.stdout)["events"]
    return events


def _spent_today(project: Path) -> float:
    return FileSpendCounter(project / ".git" / "iterion" / "store").today().spent_usd


def test_a_raised_cap_resumes_the_same_child_and_every_cent_is_counted_once(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(CHILD)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("0.05"))
    out = cli_json("run", "p.bot", cwd=project)
    assert (out["status"], out["failure_code"]) == ("failed_resumable", "BUDGET_EXCEEDED"), out
    child = run_docs(project)[out["run_id"]]["subbot_children"]["kid"]
    # the child's 0.06 stopped the parent at its 0.05, and is in the parent's accounting
    spent = cli_json("inspect", "--run-id", out["run_id"], cwd=project)["budget"]["consumed"]["cost_usd"]
    assert spent == pytest.approx(0.06)
    assert _spent_today(project) == pytest.approx(0.06)  # the store's counter: once, not twice

    done = cli_json("resume", "--run-id", out["run_id"], "--max-cost-usd", "1", cwd=project)
    assert done["status"] == "finished", done
    docs = run_docs(project)
    assert docs[out["run_id"]]["subbot_children"] == {"kid": child} and docs[child]["status"] == "finished"
    assert len(docs) == 2  # the same child, continued under the raised cap
    assert docs[child]["budget"]["max_cost_usd"] == pytest.approx(1.0)
    # node two re-executed (0.03 more): 0.09 in the child, the parent and the counter alike
    assert cli_json("inspect", "--run-id", child, cwd=project)["budget"]["consumed"]["cost_usd"] == pytest.approx(0.09)
    assert cli_json("inspect", "--run-id", out["run_id"], cwd=project)["budget"]["consumed"]["cost_usd"] \
        == pytest.approx(0.09)
    assert _spent_today(project) == pytest.approx(0.09)


def test_the_daily_cap_parks_the_child_and_its_parent_and_a_raised_cap_resumes_both(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(CHILD)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("0"))
    env = {"ITERION_DAILY_COST_CAP_USD": "0.05"}
    out = cli_json("run", "p.bot", cwd=project, env=env)
    assert out["status"] == "paused_operator", out
    parent = out["run_id"]
    child = run_docs(project)[parent]["subbot_children"]["kid"]
    assert run_docs(project)[child]["status"] == "paused_operator"
    assert _spent_today(project) == pytest.approx(0.06)  # the child's two charges, counted once
    for run_id, node in ((parent, "kid"), (child, "two")):
        events = _events(project, run_id)
        paused = [e for e in events if e["type"] == "run_paused"][-1]
        assert paused["payload"]["pause_reason"] == "daily_cap" and paused["payload"]["cap_usd"] == 0.05
        assert (paused["node"], paused["iteration"]) == (node, 0)  # the interrupted execution
        # a pause, not a failure: no node_failed, and every code an event carries is a typed one
        assert not [e for e in events if e["type"] == "node_failed"]
        assert all(FailureCode(e["payload"]["code"]) for e in events if e["payload"].get("code"))

    refused = run_cli("resume", "--run-id", parent, cwd=project, env=env)
    assert refused.returncode == 2 and "$0.06 spent today" in refused.stderr, refused.stderr
    assert run_docs(project)[parent]["status"] == "paused_operator"

    done = cli_json("resume", "--run-id", parent, "--max-daily-cost-usd", "1", cwd=project, env=env)
    assert done["status"] == "finished", done
    docs = run_docs(project)
    assert docs[child]["status"] == "finished" and len(docs) == 2  # the same child, resumed
    resumed = [e for e in _events(project, child) if e["type"] == "run_resumed"][-1]
    assert resumed["payload"]["daily_cap_usd"] == 1  # the parent's override reached the child
    assert _spent_today(project) == pytest.approx(0.09)  # two re-executed: 0.03 more, counted once
    assert cli_json("inspect", "--run-id", parent, cwd=project)["budget"]["consumed"]["cost_usd"] \
        == pytest.approx(0.09)


def test_a_parent_killed_before_parking_on_its_childs_cap_parks_on_it_when_resumed(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(CHILD)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("0"))
    env = {"ITERION_DAILY_COST_CAP_USD": "0.05"}
    proc = run_cli("run", "p.bot", cwd=project, env={**env, "ITERION_TEST_KILL_AT": "subbot-child-stopped:1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
    child = run_docs(project)[parent]["subbot_children"]["kid"]
    assert run_docs(project)[child]["status"] == "paused_operator"
    assert run_docs(project)[parent]["status"] == "running"
    # the takeover reattaches the child, still over the cap: the parent parks on the cap, not failed
    again = cli_json("resume", "--run-id", parent, cwd=project, env=env)
    assert again["status"] == "paused_operator", again
    paused = [e for e in _events(project, parent) if e["type"] == "run_paused"][-1]["payload"]
    assert paused["pause_reason"] == "daily_cap"
    done = cli_json("resume", "--run-id", parent, "--max-daily-cost-usd", "1", cwd=project, env=env)
    assert done["status"] == "finished", done
    assert len(run_docs(project)) == 2 and run_docs(project)[child]["status"] == "finished"
    assert _spent_today(project) == pytest.approx(0.09)


SPEND_THEN_SLOW = '''vars:
  task: string
agent one:
  backend: script
  user: "{{vars.task}}"
tool slow:
  command: "if [ -f started.flag ]; then echo again; else touch started.flag; sleep 120; fi"
workflow child:
  entry: one
  one -> slow
  slow -> done
'''


def test_a_parent_killed_while_its_child_runs_is_charged_what_the_child_spent(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(SPEND_THEN_SLOW)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("1"))
    proc = start_cli("run", "p.bot", cwd=project, start_new_session=True)
    wait_for_file(project / "started.flag", proc)  # the child spent 0.03, then runs its slow tool
    kill_process(proc)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    assert len(run_docs(project)) == 2
    # the parent's checkpoint predates the child's spend: the whole of it is charged, once
    assert cli_json("inspect", "--run-id", parent, cwd=project)["budget"]["consumed"]["cost_usd"] \
        == pytest.approx(0.03)
    assert _spent_today(project) == pytest.approx(0.03)


ONE_SPEND = '''vars:
  task: string
agent one:
  backend: script
  user: "{{vars.task}}"
workflow child:
  entry: one
  one -> done
'''


def test_a_parent_killed_after_its_child_finished_is_charged_the_child_once(project: Path) -> None:
    (project / "bots" / "child.bot").write_text(ONE_SPEND)
    (project / "bots" / "child.script.yaml").write_text(CHILD_SCRIPT)
    (project / "p.bot").write_text(_parent("1"))
    # the child finished (spent 0.03); the parent dies before it records the node's output
    proc = run_cli("run", "p.bot", cwd=project, env={"ITERION_TEST_KILL_AT": "subbot-child-stopped:1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    parent = next(i for i, d in run_docs(project).items() if d.get("parent_run") is None)
    assert run_docs(project)[run_docs(project)[parent]["subbot_children"]["kid"]]["status"] == "finished"
    done = cli_json("resume", "--run-id", parent, cwd=project)
    assert done["status"] == "finished", done
    assert len(run_docs(project)) == 2  # the finished child's outputs were taken, not a new child's
    assert cli_json("inspect", "--run-id", parent, cwd=project)["budget"]["consumed"]["cost_usd"] \
        == pytest.approx(0.03)
    assert _spent_today(project) == pytest.approx(0.03)
