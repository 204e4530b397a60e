"""The service's operations in process (no HTTP): commits and diffs of both run shapes, the budget
wire format, path confinement, and the recovery hint's error rule. Fast: no server, no browser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iterion.budget import BudgetAsk
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.server.auth import is_loopback, matches
from iterion.requests import Budget, RequestError
from iterion.server.service import ApiError, Service, from_user_error
from iterion.store import RunStatus, Store
from tests.conftest import git, write_bot

THREE = """
tool one:
  command: "echo one > one.txt && echo edited >> README.md"

tool two:
  command: "mkdir -p sub && echo two > sub/two.txt && rm one.txt"

tool three:
  command: "echo three > three.txt"

workflow three_edits:
  entry: one
  one -> two
  two -> three
  three -> done
"""
LABELS = ["pre:one:0", "nodes:one:0", "pre:two:0", "nodes:two:0", "pre:three:0", "nodes:three:0"]


def _run(ws: Path, src: Path, text: str) -> tuple[Service, str]:
    store = Store.open(None, ws)
    r = launch_run(store, write_bot(src, text), LaunchOptions(workspace=ws, watch=False))
    assert r.status is RunStatus.FINISHED, r.error
    return Service(store, ws), r.run_id


def test_worktree_run_commits_files_and_timeline(tmp_path: Path, ws: Path) -> None:
    base = git(ws, "rev-parse", "HEAD").strip()
    svc, rid = _run(ws, ws / "src", THREE.replace("  entry: one", "  entry: one\n  worktree: auto"))
    commits = svc.commits(rid)
    assert commits["available"] is True and commits["base_commit"] == base
    assert [c["label"] for c in commits["commits"]] == LABELS
    assert all(len(c["commit"]) == 40 for c in commits["commits"])
    files = svc.files(rid, "pre:one:0", "nodes:three:0")
    assert files["files"] == [{"path": "README.md", "kind": "modified"}, {"path": "sub/two.txt", "kind": "added"},
                              {"path": "three.txt", "kind": "added"}]
    assert "+edited" in files["diff"] and "+three" in files["diff"]
    rows = {x["node"]: x for x in svc.get_run(rid)["executions"]}
    assert set(rows["one"]["files"]) == {"one.txt", "README.md"} and rows["one"]["status"] == "finished"
    assert set(rows["two"]["files"]) == {"one.txt", "sub/two.txt"}


def test_in_place_files_diff_and_unavailable_commits(tmp_path: Path, ws: Path) -> None:
    svc, rid = _run(ws, tmp_path / "src", THREE)
    files = svc.files(rid, "nodes:one:0", "nodes:two:0")
    assert [(f["path"], f["kind"]) for f in files["files"]] == [("one.txt", "deleted"), ("sub/two.txt", "added")]
    assert "--- a/one.txt\n+++ /dev/null\n" in files["diff"] and "+two\n" in files["diff"]
    commits = svc.commits(rid)
    assert commits["available"] is False and commits["reason"] == "in_place"
    assert "workspace_checkpoint" not in commits and [b["label"] for b in commits["boundaries"]] == LABELS
    with pytest.raises(ApiError) as missing:
        svc.files(rid, "pre:zzz:0", "nodes:two:0")
    assert missing.value.status == 404
    with pytest.raises(ApiError) as bad:
        svc.files(rid, "pre:one:0", None)
    assert bad.value.status == 422
    with pytest.raises(ApiError) as upload:  # a file answer naming a path outside the project
        svc.resume(rid, {"answers": {"music": "@/etc/passwd"}})
    assert upload.value.status == 422 and "outside the project" in upload.value.message


def test_unreadable_timeline_is_an_error_not_an_absent_hint(tmp_path: Path, ws: Path) -> None:
    svc, rid = _run(ws, tmp_path / "src", THREE)
    events = svc.store.run_dir(rid) / "events.jsonl"
    events.unlink()
    events.mkdir()  # reading it fails with an OSError
    for call in (svc.get_run, svc.commits):
        with pytest.raises(ApiError) as err:
            call(rid)
        assert err.value.status >= 500


def _wire_budget(raw: object) -> BudgetAsk | None:
    return None if raw is None else Budget.parse(raw).ask()


def test_budget_wire_format_matches_the_cli_flags() -> None:
    assert _wire_budget(None) is None
    assert _wire_budget({"max_duration": "0", "max_tokens": 0}) is None  # zero inherits: no override
    assert _wire_budget({"max_duration": "4h"}) == BudgetAsk(max_duration_s=14400.0)
    assert _wire_budget({"max_cost_usd": 2, "max_iterations": 9}) == BudgetAsk(max_cost_usd=2.0, max_iterations=9)
    for bad, words in (({"max_tokens": "many"}, "--max-tokens must be an integer"),
                       ({"max_cost_usd": float("nan")}, "--max-cost-usd nan is not a finite number"),
                       ({"max_duration": "soon"}, "soon"), ({"max_tokens": -5}, "invalid budget override"),
                       ({"max_cents": 1}, "unknown budget field 'max_cents'"), ([1], "budget must be a JSON object")):
        with pytest.raises(RequestError) as err:
            _wire_budget(bad)
        api = from_user_error(err.value)
        assert api.status == 422 and words in api.message


def test_paths_are_confined_to_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (tmp_path / "outside.bot").write_text("x")
    os.symlink(tmp_path / "outside.bot", project / "sub" / "link.bot")
    svc = Service(Store(tmp_path / "store"), project)
    assert svc.confine("sub", "file") == (project / "sub").resolve()
    for raw in ("../outside.bot", str(tmp_path / "outside.bot"), "sub/link.bot", "sub/../../outside.bot", "a\0b", ""):
        with pytest.raises(ApiError) as err:
            svc.confine(raw, "file")
        assert err.value.status == 422


def test_token_compare_and_loopback() -> None:
    assert matches("a" * 20, "a" * 20) and not matches("a" * 19, "a" * 20) and not matches(None, "a" * 20)
    assert not matches("é" * 20, "a" * 20)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.0.2.7")


def test_a_tool_output_mismatch_shows_on_its_execution(tmp_path: Path, ws: Path) -> None:
    """docs/language.md §2: the tool_output_mismatch warning is shown on the web timeline's row."""
    text = (Path(__file__).resolve().parents[2] / "fixtures" / "workflows" / "run_tool_mismatch.bot").read_text()
    svc, rid = _run(ws, tmp_path / "src", text)
    rows = {x["node"]: x for x in svc.get_run(rid)["executions"]}
    (warned,) = rows["check"]["warnings"]
    assert warned["code"] == "tool_output_mismatch" and "count" in warned["message"]
    assert "warnings" not in rows["after"]
    from iterion.server.web import run_page

    assert "tool_output_mismatch: tool check: output does not match schema probe" in run_page(svc.get_run(rid), "t0ken")
