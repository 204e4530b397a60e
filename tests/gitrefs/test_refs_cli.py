"""`iterion refs ...` in a real subprocess: bad input is one error line and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ..conftest import run_cli
from .refs_helpers import git


def _assert_one_error(proc, *, contains: str, code: int = 2) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and contains in lines[0]
    assert all(line.startswith("hint: ") for line in lines[1:])


def test_not_a_repository(tmp_path: Path) -> None:
    _assert_one_error(run_cli("refs", "list", "--run-id", "r", "--repo", str(tmp_path)),
                      contains="not inside a git repository")


def test_bare_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "--bare", "b.git")
    _assert_one_error(run_cli("refs", "snapshot", "--repo", str(tmp_path / "b.git")),
                      contains="bare repository")


@pytest.mark.parametrize("run_id, named", [("a b", "space"), ("x:y", "':'"), ("n/1", "'/'")])
def test_invalid_run_id_names_the_character(repo: Path, run_id: str, named: str) -> None:
    _assert_one_error(run_cli("refs", "start", "--run-id", run_id, "--repo", str(repo)), contains=named)


def test_unknown_run_and_bad_label(repo: Path) -> None:
    _assert_one_error(run_cli("refs", "list", "--run-id", "ghost", "--repo", str(repo)),
                      contains="no run 'ghost'")
    assert run_cli("refs", "start", "--run-id", "r1", "--repo", str(repo)).returncode == 0
    _assert_one_error(run_cli("refs", "boundary", "post:a:0", "--run-id", "r1", "--repo", str(repo)),
                      contains="unknown kind")
    _assert_one_error(run_cli("refs", "scope", "pre:never:0", "--run-id", "r1", "--repo", str(repo)),
                      contains="no boundary pre:never:0")


def test_missing_remote(repo: Path) -> None:
    assert run_cli("refs", "start", "--run-id", "r1", "--repo", str(repo)).returncode == 0
    assert run_cli("refs", "boundary", "nodes:a:0", "--run-id", "r1", "--repo", str(repo)).returncode == 0
    _assert_one_error(run_cli("refs", "push", "nodes:a:0", "--remote", "nowhere", "--run-id", "r1",
                              "--repo", str(repo)),
                      contains="no remote 'nowhere'")


def test_a_whole_run_through_the_cli(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")

    from typer.testing import CliRunner

    from cli.main import app

    def cli(*args: str) -> dict | list | None:  # type: ignore[type-arg]
        # The real app, in-process: the happy path needs no process start per command (the
        # error paths above and the restore-bank calls below do go through a subprocess).
        result = CliRunner().invoke(app, ["refs", *args, "--repo", str(repo), "--json"])
        assert result.exit_code == 0, (result.output, result.exception)
        return json.loads(result.stdout)

    started = cli("start", "--run-id", "r1")
    assert isinstance(started, dict) and started["base"] == git(repo, "rev-parse", "HEAD").strip()
    cli("boundary", "pre:gen:0", "--run-id", "r1")
    (repo / "out.txt").write_text("generated")
    cli("boundary", "nodes:gen:0", "--run-id", "r1")
    listed = cli("list", "--run-id", "r1")
    assert isinstance(listed, dict)
    assert [b["label"] for b in listed["boundaries"]] == ["pre:gen:0", "nodes:gen:0"]
    scope = cli("scope", "pre:gen:0", "--run-id", "r1")
    assert scope == {"pivot": "pre:gen:0", "empty": False, "paths": ["out.txt"], "idle_paths": []}
    pushed = cli("push", "nodes:gen:0", "--run-id", "r1")
    hint = cli("hint", "--run-id", "r1")
    assert isinstance(pushed, dict) and isinstance(hint, dict)
    assert hint["fetch_command"] == f"git fetch origin {pushed['ref']}" and hint["commit"] == pushed["commit"]
    reverted = cli("revert", "pre:gen:0", "--run-id", "r1")
    assert isinstance(reverted, dict) and reverted["removed"] == ["out.txt"]
    assert not (repo / "out.txt").exists()
    assert cli("runs") == ["r1"]

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    (clone / "dirty.txt").write_text("x")
    refused = run_cli("refs", "restore-bank", "--ref", pushed["ref"], "--head", pushed["commit"],
                      "--base", started["base"], "--repo", str(clone))
    _assert_one_error(refused, contains="uncommitted changes", code=2)
    (clone / "dirty.txt").unlink()
    ok = run_cli("refs", "restore-bank", "--ref", pushed["ref"], "--head", pushed["commit"],
                 "--base", started["base"], "--repo", str(clone), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["restored"] is True
    assert (clone / "out.txt").read_text() == "generated"


def test_snapshot_and_empty_hint(repo: Path, tmp_path: Path) -> None:
    from .refs_helpers import guarded_state, reference_tree
    (repo / "new.txt").write_text("n")
    before = guarded_state(repo)
    snap = run_cli("refs", "snapshot", "--repo", str(repo), "--json")
    assert snap.returncode == 0, snap.stderr
    assert guarded_state(repo) == before
    assert json.loads(snap.stdout)["tree"] == reference_tree(repo, tmp_path / "scratch")
    from typer.testing import CliRunner

    from cli.main import app
    assert CliRunner().invoke(app, ["refs", "start", "--run-id", "r1", "--repo", str(repo)]).exit_code == 0
    hint = CliRunner().invoke(app, ["refs", "hint", "--run-id", "r1", "--repo", str(repo), "--json"])
    assert hint.exit_code == 0 and json.loads(hint.stdout) is None
