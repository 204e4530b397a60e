"""Run-time behaviour the original has, through the CLI, one fixture each (issue 28 points 2, 3,
5, 6 and 7; point 1 is tests/engine/test_convergence_run.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from ..conftest import run_cli
from .conftest import write_bot

WORKFLOWS = Path(__file__).resolve().parents[2] / "fixtures" / "workflows"


def _run(bot: Path, tmp_path: Path, ws: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), *extra, cwd=ws)
    assert "Traceback" not in p.stderr, p.stderr
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    detail = json.loads(run_cli("inspect", "--run-id", run["id"], "--store-dir", str(store), "--json", "--events",
                                cwd=ws).stdout)
    return p.returncode, detail


def _counts(detail: dict[str, Any]) -> Counter[str]:
    return Counter(x.rsplit(":", 1)[0] for x in detail["executed"])


def test_with_value_naming_a_node_not_run_yet_is_null(tmp_path: Path, ws: Path) -> None:
    """Point 2 (dsl.md 3.6, 4): the first round's `seen` is null, not "{{outputs.extend.v}}"."""
    code, detail = _run(WORKFLOWS / "run_with_null.bot", tmp_path, ws)
    assert code == 0, detail.get("error")
    assert detail["outputs"]["collect"] == {"tags": ["x", "y"]}  # round 2 read round 1's extend
    started = [e for e in detail["events"] if e["type"] == "node_started" and e["node"] == "collect"]
    assert len(started) == 2
    assert _counts(detail) == Counter({"gather": 2, "collect": 2, "extend": 2})


def test_project_dir_in_a_var_default_is_the_runs_workspace(tmp_path: Path, ws: Path) -> None:
    """Point 3 (dsl.md 1.7): resolved at run start, not '' at compile time."""
    code, detail = _run(WORKFLOWS / "run_project_dir.bot", tmp_path, ws)
    assert code == 0, detail.get("error")
    root = str(ws.resolve())
    assert detail["outputs"]["where"]["stdout"] == f"{root}/reports {root}\n"
    other = tmp_path / "elsewhere"
    other.mkdir()
    code, detail = _run(WORKFLOWS / "run_project_dir.bot", tmp_path / "b", ws, "--workspace", str(other),
                        "--var", "root=${PROJECT_DIR}/x")
    assert code == 0, detail.get("error")
    assert detail["outputs"]["where"]["stdout"] == f"{other.resolve()}/reports {other.resolve()}/x\n"


def test_project_dir_of_a_worktree_run_is_its_worktree(tmp_path: Path, ws: Path) -> None:
    src = (WORKFLOWS / "run_project_dir.bot").read_text().replace("  entry: where\n",
                                                                   "  entry: where\n  worktree: auto\n")
    bot = write_bot(tmp_path / "src", src)
    code, detail = _run(bot, tmp_path, ws)
    assert code == 0, detail.get("error")
    worktree = detail["worktree"]["path"] if isinstance(detail.get("worktree"), dict) else detail["workspace"]
    assert worktree != str(ws.resolve())
    assert detail["outputs"]["where"]["stdout"] == f"{worktree}/reports {worktree}\n"


def test_previous_output_lags_one_crossing(tmp_path: Path, ws: Path) -> None:
    """Point 5 (dsl.md 3.5): a reviewer flipping back to the family of two rounds ago stops the
    loop after 3 reviews; with no lag it compared each round with the last and ran all 15."""
    bot = write_bot(tmp_path / "src", (WORKFLOWS / "run_loop_lag.bot").read_text(),
                    {"review": {str(i): {"output": {"family": "ab"[i % 2]}} for i in range(20)}})
    code, detail = _run(bot, tmp_path, ws, "--backend", "script")
    assert code == 0, detail.get("error")
    assert _counts(detail) == Counter({"review": 3, "improve": 2})
    loops = [e["payload"]["iteration"] for e in detail["events"] if e["type"] == "loop_iteration"]
    assert loops == [1, 2]


def test_two_mutating_fan_out_branches_are_refused_before_any_runs(tmp_path: Path, ws: Path) -> None:
    """Point 6 (dsl.md 3.4): WORKSPACE_SAFETY, failed_resumable, the branches named."""
    # (a script file: a run whose backend is unusable here is refused before it exists, issue 34)
    bot = write_bot(tmp_path / "src", (WORKFLOWS / "run_fanout_safety.bot").read_text(), {"*": {"*": {"output": {}}}})
    code, detail = _run(bot, tmp_path, ws, "--backend", "script")
    assert code == 5, detail.get("error")
    assert detail["status"] == "failed_resumable" and detail["failure_code"] == "WORKSPACE_SAFETY"
    assert "-> draft_a" in detail["error"] and "-> draft_b" in detail["error"]
    assert "survey" not in detail["error"] and "audit" not in detail["error"]
    assert detail["executed"] == ["spread:0"]  # no branch ran
    assert not [e for e in detail["events"] if e["type"] == "branch_started"]


def test_one_mutating_branch_among_readers_runs(tmp_path: Path, ws: Path) -> None:
    src = (WORKFLOWS / "run_fanout_safety.bot").read_text().replace("  tools: [edit_file]\n",
                                                                     "  tools: [edit_file]\n  readonly: true\n")
    bot = write_bot(tmp_path / "src", src, {"*": {"*": {"output": {}}}})
    code, detail = _run(bot, tmp_path, ws, "--backend", "script")
    assert code == 0, detail.get("error")
    assert _counts(detail) == Counter({"spread": 1, "draft_a": 1, "draft_b": 1, "survey": 1, "audit": 1,
                                       "merge": 1})


def test_tool_output_not_matching_its_schema_warns_and_goes_on(tmp_path: Path, ws: Path) -> None:
    """Point 7 (dsl.md 2.7): a tool_output_mismatch warning naming the fields; the run goes on."""
    code, detail = _run(WORKFLOWS / "run_tool_mismatch.bot", tmp_path, ws)
    assert code == 0, detail.get("error")
    assert detail["outputs"]["check"] == {"healthy": "yes", "extra": 1}
    assert detail["outputs"]["after"]["stdout"] == "yes\n"
    (warned,) = [e for e in detail["events"] if e["type"] == "warning"]
    assert warned["node"] == "check"
    assert warned["payload"]["code"] == "tool_output_mismatch" and warned["payload"]["missing"] == ["count"]
    assert warned["payload"]["wrong_type"] == [{"field": "healthy", "expected": "bool", "got": "string"}]
    # inspect's timeline shows it
    p = run_cli("inspect", "--run-id", detail["id"], "--store-dir", str(tmp_path / "store"), "--events", cwd=ws)
    assert p.returncode == 0 and "tool_output_mismatch" in p.stdout


def test_an_llm_output_not_matching_its_schema_is_still_schema_validation(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        schema verdict:
          approved: bool

        agent review:
          model: "m"
          output: verdict

        workflow s:
          entry: review
          review -> done
    """)
    script = tmp_path / "answers.yaml"
    script.write_text(yaml.safe_dump({"review": {"*": {"output": {"approved": "maybe"}}}}))
    code, detail = _run(bot, tmp_path, ws, "--backend", "script", "--script", str(script))
    assert code == 5 and detail["failure_code"] == "SCHEMA_VALIDATION"
