"""Authorship after a crash is never guessed silently (issue 11, point 3).

A run is SIGKILLed inside node ``work`` after writing a file; a person then edits a tracked file
and creates a new one in the same workspace. Whatever way the run is taken over - a plain
`resume` (its owner is provably dead), `resume --force-stale` (owner on another host, the guard
window lowered with its test-only variable), `reconcile` - a later `rewind --node work` restores
those paths but lists them in files.overwritten (CLI text, --json, the run_rewound event), their
content is in the bank, and the printed undo command, run as printed by a shell, brings them
back byte-identical. In place (workspacetrack) and in a worktree (gitrefs). (The workflow ends at
a human gate so the resumed run parks there: a finished run cannot be rewound.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from ..conftest import write_bot
from .takeover_helpers import (
    TIMEOUT,
    cli,
    cli_json,
    crash,
    env,
    events,
    move_owner_to_another_host,
    only_run,
    start_run,
    wait_for,
)

EDIT = "README.md"          # tracked, present when `work` started
EDITED = "hello\nthe person's edit, not the node's \xe9\u2014\n".encode()
NEW = "my notes.txt"        # created by the person (a space: the undo command must quote it)
NEW_BYTES = b"person's new file\n\x00\xff binary tail\n"


def _bot(tmp_path: Path, worktree: bool) -> Path:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    return write_bot(tmp_path / "src", f"""
        schema ok:
          approved: bool

        tool prep:
          command: "echo prep > prep.txt"

        tool work:
          command: "echo partial > work.txt; echo $$ > {ctl}/tool.pid; echo up > {ctl}/work.started; while [ ! -f {ctl}/go.flag ]; do sleep 0.05; done; echo more >> work.txt"

        tool after:
          command: "echo after > after.txt"

        human approve:
          output: ok

        workflow w:
          entry: prep{chr(10) + '          worktree: auto' if worktree else ''}
          prep -> work
          work -> after
          after -> approve
          approve -> done
    """)


def _run_dir_of(store: Path, rid: str) -> Path:
    doc = Store(store).load_run(rid)
    assert doc.workspace_dir
    return Path(doc.workspace_dir)


@pytest.mark.parametrize("how", ["resume", "force_stale", "reconcile"])
@pytest.mark.parametrize("mode", ["in_place", "worktree"])
def test_person_edits_after_a_crash_are_named_banked_and_undoable(tmp_path: Path, ws: Path, how: str,
                                                                    mode: str) -> None:
    store = tmp_path / "store"
    ctl = tmp_path / "ctl"
    proc = start_run(_bot(tmp_path, mode == "worktree"), cwd=ws, store=store)
    wait_for(ctl / "work.started", proc)
    crash(proc, ctl / "tool.pid")
    rid = only_run(store)
    work_dir = _run_dir_of(store, rid)
    assert (work_dir / "work.txt").read_text() == "partial\n"  # the dead node's write
    original = (work_dir / EDIT).read_bytes()

    # the person, in the run's workspace, after the crash and before any takeover
    (work_dir / EDIT).write_bytes(EDITED)
    (work_dir / NEW).write_bytes(NEW_BYTES)

    (ctl / "go.flag").write_text("")
    if how == "resume":
        done = cli_json("resume", "--run-id", rid, cwd=ws, store=store)
        assert done["status"] == "paused_waiting_human", done  # parked at the gate: rewindable
    elif how == "force_stale":
        move_owner_to_another_host(store, rid)  # not provable from here: the guard, lowered for the test
        done = cli_json("resume", "--run-id", rid, "--force-stale", cwd=ws, store=store,
                        extra_env={"ITERION_STALE_AFTER_S": "0"})
        assert done["status"] == "paused_waiting_human", done  # parked at the gate: rewindable
    else:
        rec = cli("reconcile", "--json", cwd=ws, store=store)  # at once: the owner is provably dead
        assert rec.returncode == 0, rec.stderr
        assert [p["run_id"] for p in json.loads(rec.stdout)] == [rid]
        assert Store(store).load_run(rid).status is RunStatus.FAILED_RESUMABLE
    (taken,) = events(store, rid, "run_taken_over")
    assert taken.payload["how"] == {"reconcile": "promotion"}.get(how, how)
    assert taken.payload["label"] == "takeover:work:0"
    assert {EDIT, NEW, "work.txt"} <= set(taken.payload["unattributable"])
    # nothing of the person's was touched by the takeover or the resumed run
    assert (work_dir / EDIT).read_bytes() == EDITED and (work_dir / NEW).read_bytes() == NEW_BYTES

    as_json = (how == "force_stale") != (mode == "worktree")  # text and JSON, each mode
    if as_json:
        result = cli_json("rewind", "--run-id", rid, "--node", "work", cwd=ws, store=store)
        assert result["_rc"] == 0, result
        files = result["files"]
        overwritten, undo = files["overwritten"], files["undo"]
    else:
        p = cli("rewind", "--run-id", rid, "--node", "work", cwd=ws, store=store)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        overwritten = [ln.split(" (")[0].removeprefix("  overwritten ") for ln in lines
                       if ln.startswith("  overwritten ")]
        (undo_line,) = [ln for ln in lines if "to bring the overwritten files back, run: " in ln]
        undo = undo_line.split("to bring the overwritten files back, run: ", 1)[1]
        files = None
    assert {EDIT, NEW} <= set(overwritten), (overwritten, undo)
    assert undo and NEW in undo

    (rewound,) = events(store, rid, "run_rewound")
    assert {EDIT, NEW} <= set(rewound.payload["files_overwritten"])
    assert rewound.payload["files_undo"] == undo
    if files is not None:
        assert rewound.payload["files_overwritten"] == files["overwritten"]

    # the rewind restored them (the node's debris must not survive its replay)...
    assert (work_dir / EDIT).read_bytes() == original
    assert not (work_dir / NEW).exists() and not (work_dir / "work.txt").exists()
    # ...after banking them
    bank = rewound.payload["files_backup_ref"]
    if mode == "worktree":
        for path, data in ((NEW, NEW_BYTES), (EDIT, EDITED)):
            banked = subprocess.run(["git", "cat-file", "blob", f"{bank}:{path}"], cwd=work_dir,
                                    capture_output=True, check=True).stdout
            assert banked == data
    else:
        listed = cli_json("track", "list", "--store", str(store / "runs" / rid / "track"),
                          "--workspace", str(work_dir), "--run-id", rid, cwd=ws, store=store, no_store=True)
        (bank_rec,) = [b for b in listed["banks"] if b["id"] == bank]
        assert {EDIT, NEW} <= set(bank_rec["touched"])

    # the undo command, run as printed, from anywhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    back = subprocess.run(undo, shell=True, check=False, cwd=elsewhere, env=env(), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert back.returncode == 0, (undo, back.stdout, back.stderr)
    assert (work_dir / EDIT).read_bytes() == EDITED
    assert (work_dir / NEW).read_bytes() == NEW_BYTES
    assert (work_dir / "work.txt").exists()  # the unattributable debris comes back with them
