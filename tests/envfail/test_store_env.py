"""Issue 10 point 5: a store that cannot be one, a read-only store or workspace, a lock path that is
a directory. Each: exit 2, one `error:` line naming the path, the store unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ..conftest import iterion_cmd, make_checkout, run_cli, write_bot
from .conftest import GATED, IS_ROOT, Mounts, Paused, assert_one_error, launch_paused, status_of, store_hash

# (argv after the command name) per command; RUN is replaced by the run id, BOT by the workflow
COMMANDS = {
    "run": ["BOT"],
    "resume": ["--run-id", "RUN", "--answer", "approved=true"],
    "cancel": ["--run-id", "RUN"],
    "rewind": ["--run-id", "RUN", "--node", "a"],
    "inspect": [],
}


def _argv(command: str, bot: Path, run_id: str) -> list[str]:
    return [command, *[str(bot) if a == "BOT" else run_id if a == "RUN" else a for a in COMMANDS[command]]]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("shape", ["regular file", "/dev/null", "under a file"])
def test_store_dir_that_cannot_be_a_store(tmp_path: Path, ws: Path, command: str, shape: str) -> None:
    bot = write_bot(ws, GATED)
    afile = tmp_path / "afile"
    afile.write_text("not a store\n")
    store = {"regular file": afile, "/dev/null": Path("/dev/null"), "under a file": afile / "store"}[shape]
    before = store_hash(afile)
    p = run_cli(*_argv(command, bot, "0" * 32), "--store-dir", str(store), cwd=ws)
    line = assert_one_error(p, mentions=str(store))
    assert "--store-dir" in p.stderr  # the hint names the fix
    assert store_hash(afile) == before and not (ws / ".iterion").exists()
    assert not (ws / "a.txt").exists()  # no node ran
    assert line.count("\n") == 0


@pytest.mark.parametrize("command", ["run", "resume", "cancel", "rewind"])
def test_read_only_store(tmp_path: Path, ws: Path, mounts: Mounts, command: str) -> None:
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    (ws / "a.txt").unlink()
    before = store_hash(store)
    mounts.read_only(store)
    p = run_cli(*_argv(command, ws / "wf.bot", run_id), "--store-dir", str(store), cwd=ws)
    assert_one_error(p, mentions=str(store))
    assert "read-only" in p.stderr or "not writable" in p.stderr
    assert store_hash(store) == before
    assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()  # nothing executed


@pytest.mark.parametrize("command", ["resume", "rewind"])
def test_read_only_workspace_of_a_run(tmp_path: Path, ws: Path, mounts: Mounts, command: str) -> None:
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    before, ws_before = store_hash(store), store_hash(ws)
    mounts.read_only(ws)
    p = run_cli(*_argv(command, ws / "wf.bot", run_id), "--store-dir", str(store), cwd=tmp_path)
    assert_one_error(p, mentions=str(ws))
    assert store_hash(store) == before and store_hash(ws) == ws_before
    assert status_of(store, run_id)["status"] == "paused_waiting_human"


def test_read_only_workspace_refuses_a_launch(tmp_path: Path, ws: Path, mounts: Mounts) -> None:
    bot = write_bot(tmp_path / "src", GATED)
    store = tmp_path / "store"
    mounts.read_only(ws)
    for argv in (["--workspace", str(ws)], []):  # explicit, and the current directory
        p = run_cli("run", str(bot), "--store-dir", str(store), *argv, cwd=ws)
        assert_one_error(p, mentions=str(ws))
        assert not store.exists()  # nothing created: not even the store directory


def test_cancel_needs_no_writable_workspace(tmp_path: Path, ws: Path, mounts: Mounts) -> None:
    """A cancel only writes the store, so a read-only workspace does not stop it (and is untouched)."""
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    ws_before = store_hash(ws)
    mounts.read_only(ws)
    p = run_cli("cancel", "--run-id", run_id, "--store-dir", str(store), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert status_of(store, run_id)["status"] == "cancelled" and store_hash(ws) == ws_before


@pytest.mark.parametrize("command", ["resume", "cancel", "rewind"])
def test_lock_path_that_is_a_directory(paused: Paused, command: str) -> None:
    ws, store, run_id = paused.fresh()
    lock = store / "runs" / run_id / "lock"
    lock.unlink()
    lock.mkdir()
    (lock / "something").write_text("x")
    before = store_hash(store)
    p = run_cli(*_argv(command, ws / "wf.bot", run_id), "--store-dir", str(store), cwd=ws)
    assert_one_error(p, mentions=str(lock))
    assert "rm -r" in p.stderr
    assert store_hash(store) == before


NOBODY = 65534


@pytest.mark.parametrize("command", ["run", "resume", "cancel", "rewind"])
def test_store_read_only_by_permissions(command: str) -> None:
    """The chmod flavour: permission bits, not a read-only mount. Root ignores mode bits, so as
    root the CLI runs as `nobody` (setpriv) over files that nobody owns."""
    base = Path(tempfile.mkdtemp(prefix="iterion-envfail-"))
    try:
        base.chmod(0o755)
        ws, store = make_checkout(base / "ws"), base / "store"
        run_id = launch_paused(ws, store)
        (ws / "a.txt").unlink()
        if IS_ROOT:
            subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(base)], check=True)
        for dirpath, dirnames, _ in os.walk(store):
            for d in (dirpath, *(os.path.join(dirpath, n) for n in dirnames)):
                os.chmod(d, 0o555)
        before = store_hash(store)
        argv = iterion_cmd(*_argv(command, ws / "wf.bot", run_id), "--store-dir", str(store))
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if IS_ROOT else []
        p = subprocess.run([*prefix, *argv], check=False, cwd=ws, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HOME": str(base)})
        assert_one_error(p, mentions="permission denied")
        assert store_hash(store) == before and not (ws / "a.txt").exists()
    finally:
        for dirpath, dirnames, _ in os.walk(base):
            for d in (dirpath, *(os.path.join(dirpath, n) for n in dirnames)):
                os.chmod(d, 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_unforeseen_write_failure_is_one_line(tmp_path: Path, mounts: Mounts) -> None:
    """The last resort (gitrefs/persist/oserror.py): an OSError of the environment that no check foresaw
    is one `error:` line naming the path, exit 2, not an internal error."""
    target = tmp_path / "ro"
    target.mkdir()
    mounts.read_only(target)
    p = run_cli("init", str(target / "demo"), cwd=tmp_path)
    assert_one_error(p, mentions=str(target / "demo"))
    assert "read-only" in p.stderr.lower() or "permission" in p.stderr.lower()
    assert not (target / "demo").exists()


def test_rewind_dry_run_works_on_a_read_only_store(tmp_path: Path, ws: Path, mounts: Mounts) -> None:
    """A dry run changes nothing, so a read-only store (a real read-only bind mount as root) does
    not stop it: it prints the same plan as on a writable store, and neither store is changed
    (what the preview's disk scan stores goes to a scratch directory, workspacetrack/store.py)."""
    import json

    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    (ws / "a.txt").write_text("my own edit\n")
    argv = ["rewind", "--run-id", run_id, "--node", "a", "--dry-run", "--json", "--store-dir", str(store)]
    before, ws_before = store_hash(store), store_hash(ws)
    writable = run_cli(*argv, cwd=ws)
    assert writable.returncode == 0, writable.stderr
    assert store_hash(store) == before  # not one object, cache or lock file written
    mounts.read_only(store)
    p = run_cli(*argv, cwd=ws)
    assert p.returncode == 0, p.stderr
    assert p.stdout == writable.stdout and "warning" not in p.stderr
    files = json.loads(p.stdout)["files"]
    assert files["removed"] == ["a.txt"] and files["overwritten"] == ["a.txt"]
    assert store_hash(store) == before and store_hash(ws) == ws_before
    human = run_cli(*[a for a in argv if a != "--json"], cwd=ws)
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith(f"dry run: would rewind run {run_id}: gate -> a")
    assert status_of(store, run_id)["status"] == "paused_waiting_human"
