"""Issue 10 point 5: run ids that can name no run, workspaces that are refused, a backend or a script
file that does not exist. Each: exit 2, one `error:` line (one line even for a newline or 5,000
characters), nothing created, no node run."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from ..conftest import run_cli, write_bot
from .conftest import GATED, Paused, assert_one_error, launch_paused, status_of, store_hash

LONG = "a" * 5000
NEWLINE = "ab\ncd"


@pytest.mark.parametrize("command", ["inspect", "resume", "cancel", "rewind", "pause", "fork"])
@pytest.mark.parametrize("ref", [LONG, NEWLINE, "0" * 31 + "\r"], ids=["5000-chars", "newline", "carriage-return"])
def test_run_id_that_can_name_no_run(paused: Paused, command: str, ref: str) -> None:
    ws, store, run_id = paused.fresh()
    before = store_hash(store)
    extra = {"rewind": ["--node", "a"], "fork": ["--node", "a"]}.get(command, [])
    p = run_cli(command, "--run-id", ref, *extra, "--store-dir", str(store), cwd=ws)
    line = assert_one_error(p)
    assert len(line) < 300, line  # cut, not 5,000 characters
    assert "\r" not in p.stderr and all(ln.startswith(("error:", "hint:")) for ln in p.stderr.splitlines())
    assert store_hash(store) == before and status_of(store, run_id)["status"] == "paused_waiting_human"


def test_workspace_root_is_refused(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", GATED)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), "--workspace", "/", cwd=ws)
    assert_one_error(p, mentions="workspace / ")
    assert not store.exists() and not Path("/a.txt").exists()


@pytest.mark.parametrize("where", ["tmp", "root"])
def test_missing_workspace_is_refused_not_created(tmp_path: Path, ws: Path, where: str) -> None:
    bot = write_bot(tmp_path / "src", GATED)
    store = tmp_path / "store"
    missing = tmp_path / "no" / "such" if where == "tmp" else Path(f"/nonexistent-{secrets.token_hex(4)}")
    p = run_cli("run", str(bot), "--store-dir", str(store), "--workspace", str(missing), cwd=ws)
    assert_one_error(p, mentions=str(missing))
    assert "mkdir -p" in p.stderr
    assert not missing.exists()
    assert missing.parent == Path("/") or not missing.parent.exists()
    assert not store.exists()


def test_unknown_backend_refused_before_anything(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(ws, GATED)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), "--backend", "nope", cwd=ws)
    assert_one_error(p, mentions="nope")
    assert "script" in p.stderr  # names the known backends
    assert not store.exists() and not (ws / "a.txt").exists()


def test_missing_script_file_refused_before_anything(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(ws, GATED)
    store = tmp_path / "store"
    missing = tmp_path / "nope.script.yaml"
    p = run_cli("run", str(bot), "--store-dir", str(store), "--script", str(missing), cwd=ws)
    assert_one_error(p, mentions=str(missing))
    assert not store.exists() and not (ws / "a.txt").exists()
    p = run_cli("run", str(bot), "--store-dir", str(store), "--script", str(tmp_path), cwd=ws)  # a directory
    assert_one_error(p, mentions=str(tmp_path))
    assert not store.exists()


@pytest.mark.parametrize("flag", [["--backend", "nope"], ["--script", "missing.yaml"]])
def test_resume_refuses_bad_backend_or_script_before_anything(tmp_path: Path, ws: Path, flag: list[str]) -> None:
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    before = store_hash(store)
    p = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", *flag, "--store-dir", str(store), cwd=ws)
    assert_one_error(p)
    assert store_hash(store) == before and not (ws / "b.txt").exists()


def test_default_store_that_is_a_file(tmp_path: Path, ws: Path) -> None:
    """No --store-dir: the default store's parent (`.git/iterion`) is a regular file -> refused,
    not overwritten."""
    bot = write_bot(tmp_path / "src", GATED)
    (ws / ".git" / "iterion").write_text("mine\n")
    p = run_cli("run", str(bot), cwd=ws)
    assert_one_error(p, mentions=str(ws / ".git" / "iterion"))
    assert (ws / ".git" / "iterion").read_text() == "mine\n" and not (ws / "a.txt").exists()
