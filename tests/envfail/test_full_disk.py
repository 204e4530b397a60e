"""Issue 10 point 5: a full disk. During a run (store or workspace on a small tmpfs that a tool
fills) the run ends failed_resumable (exit 5) with a clear error, never `running`, and resumes
once space is freed. Before the run exists it leaves no half-made run: exit 2, one error line,
the store exactly as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ..conftest import run_cli, write_bot
from .conftest import Mounts, assert_one_error, launch_paused, status_of, store_hash


def _fill(mount: Path, leave: int) -> Path:
    """Fill the tmpfs at ``mount``, then give back ``leave`` bytes."""
    filler = mount / "filler"
    # unbuffered: a buffered file's close flushes what the last write left and raises ENOSPC again
    with filler.open("wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 65536):
                pass
        except OSError:
            pass
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))
    return filler


def test_store_fills_during_a_run(tmp_path: Path, ws: Path, mounts: Mounts) -> None:
    small = mounts.tmpfs(tmp_path / "small", "1m")
    store, filler, allow = small / "store", small / "filler", tmp_path / "allow"
    bot = write_bot(tmp_path / "src", f"""
        tool a:
          command: "echo alpha"

        tool fill:
          command: "test -f {allow} || dd if=/dev/zero of={filler} bs=64k 2>/dev/null; echo filled"

        tool b:
          command: "echo beta > b.txt && echo beta"

        workflow w:
          entry: a
          a -> fill
          fill -> b
          b -> done
    """)
    p = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 5, (p.stdout, p.stderr)
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr
    result = json.loads(p.stdout)
    doc = status_of(store, result["run_id"])
    assert doc["status"] == "failed_resumable" and doc["failure_code"] == "STORAGE_UNWRITABLE"
    assert "No space left on device" in str(doc["error"]) and "resume" in str(doc["error"])
    assert not (ws / "b.txt").exists()
    # space freed: an ordinary resume continues from the last checkpoint and finishes
    filler.unlink()
    allow.write_text("")
    r = run_cli("resume", "--run-id", result["run_id"], "--store-dir", str(store), "--json", cwd=ws)
    assert r.returncode == 0, r.stderr
    assert status_of(store, result["run_id"])["status"] == "finished" and (ws / "b.txt").read_text() == "beta\n"


def test_status_write_itself_meets_a_full_disk(tmp_path: Path, ws: Path, mounts: Mounts) -> None:
    """The tool fills the store's disk to the last byte, so the checkpoint AND the status writes
    fail: the run's space reserve is what lets failed_resumable be recorded."""
    small = mounts.tmpfs(tmp_path / "small", "1m")
    store, filler = small / "store", small / "filler"
    bot = write_bot(tmp_path / "src", f"""
        tool fill:
          command: "dd if=/dev/zero of={filler} bs=4k 2>/dev/null; dd if=/dev/zero of={filler}.2 bs=1 2>/dev/null; echo x"

        workflow w:
          entry: fill
          fill -> done
    """)
    p = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 5, (p.stdout, p.stderr)
    run_id = json.loads(p.stdout)["run_id"]
    assert status_of(store, run_id)["status"] == "failed_resumable"
    assert not (store / "runs" / run_id / ".space-reserve").exists()  # spent on recording the status


def test_workspace_fills_during_a_run(tmp_path: Path, mounts: Mounts) -> None:
    small = mounts.tmpfs(tmp_path / "small", "1m")
    work, store = small / "ws", tmp_path / "store"
    work.mkdir()
    bot = write_bot(tmp_path / "src", """
        tool fill:
          command: "test -f allow || dd if=/dev/zero of=filler bs=64k 2>/dev/null; echo filled"

        tool b:
          command: "yes beta | head -n 2000 > b.txt && echo beta"

        workflow w:
          entry: fill
          fill -> b
          b -> done
    """)
    p = run_cli("run", str(bot), "--store-dir", str(store), "--workspace", str(work), "--json", cwd=tmp_path)
    assert p.returncode == 5, (p.stdout, p.stderr)
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr
    run_id = json.loads(p.stdout)["run_id"]
    doc = status_of(store, run_id)
    assert doc["status"] == "failed_resumable" and "No space left on device" in str(doc["error"])
    (work / "filler").unlink()
    r = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (work / "b.txt").read_text() == "beta\n" * 2000


# 0 and 12 KiB: refused by the up-front space check; 36 KiB: passes it, writes run.json, then the
# run's space reserve does not fit and the half-made run is removed
@pytest.mark.parametrize("leave", [0, 12 * 1024, 36 * 1024])
def test_full_disk_before_the_run_exists(tmp_path: Path, ws: Path, mounts: Mounts, leave: int) -> None:
    small = mounts.tmpfs(tmp_path / "small", "2m")
    store = small / "store"
    first = launch_paused(ws, store)  # the store holds a run already; the new one must not appear
    (ws / "a.txt").unlink()
    filler = _fill(small, leave)
    before = {k: v for k, v in store_hash(small).items() if k != filler.name}
    p = run_cli("run", str(ws / "wf.bot"), "--store-dir", str(store), cwd=ws)
    assert_one_error(p, mentions="No space left on device")
    assert ("no run was created" if leave > 32 * 1024 else "nothing was changed") in p.stderr
    assert {k: v for k, v in store_hash(small).items() if k != filler.name} == before
    assert [d.name for d in (store / "runs").iterdir()] == [first] and not (ws / "a.txt").exists()


@pytest.mark.parametrize("command", ["resume", "cancel"])
def test_commands_on_a_full_store_disk(tmp_path: Path, ws: Path, mounts: Mounts, command: str) -> None:
    small = mounts.tmpfs(tmp_path / "small", "2m")
    store = small / "store"
    run_id = launch_paused(ws, store)
    (store / "runs" / run_id / ".space-reserve").unlink()  # as after a previous full-disk stop
    filler = _fill(small, 0)
    before = {k: v for k, v in store_hash(small).items() if k != filler.name}
    argv = ["--answer", "approved=true"] if command == "resume" else []
    p = run_cli(command, "--run-id", run_id, *argv, "--store-dir", str(store), cwd=ws)
    assert_one_error(p, mentions="No space left on device")
    after = {k: v for k, v in store_hash(small).items() if k != filler.name}
    assert after == before and status_of(store, run_id)["status"] == "paused_waiting_human"
