"""Issue 10 point 7: a damaged store never silently does the wrong thing.

A paused run without its checkpoint refuses to resume (answers or not, the same words) instead of
restarting from the entry; garbage in events.jsonl is moved aside byte for byte and the command
goes on; a run whose run.json is unreadable is listed as `corrupt` and named as such.
A missing checkpoint is refused by resume's check-first preflight (exit 2, nothing written); a
corrupt run.json exits 1 (cli/errors.py: "the command ran and found a problem")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import run_cli
from .conftest import Paused, assert_one_error, launch_paused, status_of, store_hash

MISSING = "checkpoint missing: nothing to resume from"


@pytest.mark.parametrize("answers", [[], ["--answer", "approved=true"], ["--answers-file", "ANSWERS"]],
                         ids=["no-answers", "answer", "answers-file"])
def test_paused_run_without_checkpoint_refuses_resume(tmp_path: Path, ws: Path, answers: list[str]) -> None:
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    (store / "runs" / run_id / "checkpoint.json").unlink()
    (ws / "a.txt").unlink()
    answers_file = tmp_path / "answers.json"
    answers_file.write_text(json.dumps({"approved": True}))
    argv = [str(answers_file) if a == "ANSWERS" else a for a in answers]
    before = store_hash(store)
    p = run_cli("resume", "--run-id", run_id, *argv, "--store-dir", str(store), cwd=ws)
    line = assert_one_error(p, 2, mentions=MISSING)
    assert str(store / "runs" / run_id / "checkpoint.json") in line
    # the fix it names works: rewind needs the checkpoint too (and refuses), so it is not offered
    assert "hint: restore checkpoint.json from a backup, or start a new run" in p.stderr, p.stderr
    assert store_hash(store) == before  # not even the lock's owner record
    assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()  # nothing restarted from the entry
    assert status_of(store, run_id)["status"] == "paused_waiting_human"


def _garbage(store: Path, run_id: str, where: str) -> bytes:
    path = store / "runs" / run_id / "events.jsonl"
    lines = path.read_bytes().split(b"\n")[:-1]
    junk = b'{"seq": 9999, "ty\xff\xfe garbage [/] \x00'
    if where == "middle":
        lines.insert(len(lines) // 2, junk)
        path.write_bytes(b"\n".join(lines) + b"\n")
        return junk + b"\n"
    path.write_bytes(b"\n".join(lines) + b"\n" + junk)  # a torn tail: no newline
    return junk + b"\n"


@pytest.mark.parametrize("where", ["middle", "torn-tail"])
@pytest.mark.parametrize("command", ["inspect", "resume", "cancel"])
def test_garbage_in_events_never_blocks(paused: Paused, command: str, where: str) -> None:
    ws, store, run_id = paused.fresh()
    events = store / "runs" / run_id / "events.jsonl"
    good = [ln for ln in events.read_bytes().split(b"\n") if ln]
    junk = _garbage(store, run_id, where)
    argv = {"inspect": ["--events"], "resume": ["--answer", "approved=true"], "cancel": []}[command]
    p = run_cli(command, "--run-id", run_id, *argv, "--store-dir", str(store), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert "error:" not in p.stderr and "Traceback" not in p.stderr
    aside = sorted(events.parent.glob("events.jsonl.corrupt-*"))
    # every command reads the whole log first (check-first preflight), so each moves a bad line aside
    assert [ln for ln in p.stderr.splitlines() if ln.startswith("warning:")].__len__() == 1, p.stderr
    assert len(aside) == 1 and aside[0].read_bytes() == junk  # every byte kept
    kept = [ln for ln in events.read_bytes().split(b"\n") if ln]
    assert kept[: len(good)] == good and all(json.loads(ln) for ln in kept)
    expected = {"inspect": "paused_waiting_human", "resume": "finished", "cancel": "cancelled"}[command]
    assert status_of(store, run_id)["status"] == expected


def test_corrupt_run_json_is_listed_and_named(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    good = launch_paused(ws, store)
    bad = launch_paused(ws, store)
    run_json = store / "runs" / bad / "run.json"
    run_json.write_bytes(b'{"id": "oops", garbage')
    before = store_hash(store)
    listing = run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws)
    assert listing.returncode == 0, listing.stderr
    rows = {r["id"]: r for r in json.loads(listing.stdout)}
    assert rows[good]["status"] == "paused_waiting_human"
    assert rows[bad]["status"] == "corrupt" and str(run_json) in rows[bad]["error"]
    table = run_cli("inspect", "--store-dir", str(store), cwd=ws)
    assert table.returncode == 0 and bad in table.stdout and "corrupt" in table.stdout
    for ref in (bad, bad[:10]):  # the full id, and a prefix
        p = run_cli("inspect", "--run-id", ref, "--store-dir", str(store), cwd=ws)
        line = assert_one_error(p, 2, mentions="run.json is corrupt")
        assert str(run_json) in line
    assert store_hash(store) == before


def test_a_damaged_checkpoint_is_named_with_its_fix_by_every_command(tmp_path: Path, ws: Path) -> None:
    """Garbage, another run's, or a directory: inspect, resume and rewind each name
    checkpoint.json and what to do (exit 2, one error line), and change nothing."""
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    other = "01" + "0" * 30  # a checkpoint copied from another run
    cp = store / "runs" / run_id / "checkpoint.json"
    good = cp.read_bytes()
    damages = {
        "garbage": lambda: cp.write_bytes(b"\x00\xffnot json"),
        "another run's": lambda: cp.write_bytes(good.replace(run_id.encode(), other.encode())),
        "a directory": lambda: (cp.unlink(), cp.mkdir()),
    }
    commands = [["inspect"], ["resume", "--answer", "approved=true"], ["rewind", "--node", "a"]]
    for what, damage in damages.items():
        damage()
        before = store_hash(store)
        for argv in commands:
            p = run_cli(argv[0], "--run-id", run_id, *argv[1:], "--store-dir", str(store), cwd=ws)
            line = assert_one_error(p, 2, mentions=str(cp))
            assert "checkpoint.json" in line and "hint: restore checkpoint.json from a backup" in p.stderr, (what, p.stderr)
        assert store_hash(store) == before, what
        if cp.is_dir():
            cp.rmdir()
        cp.write_bytes(good)
    assert status_of(store, run_id)["status"] == "paused_waiting_human"


def test_an_event_log_that_is_a_directory_is_one_line_for_inspect(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    run_id = launch_paused(ws, store)
    log = store / "runs" / run_id / "events.jsonl"
    log.unlink()
    log.mkdir()  # (EISDIR even as root)
    for argv in (["--run-id", run_id], ["--run-id", run_id, "--events", "--json"]):
        p = run_cli("inspect", *argv, "--store-dir", str(store), cwd=ws)
        assert p.stdout == ""
        line = assert_one_error(p, 2, mentions=str(log))
        assert "Is a directory" in line and "hint: a file belongs at that path" in p.stderr, p.stderr
