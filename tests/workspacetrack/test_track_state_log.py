"""The run state as state.json + an appended state.log: old format read, torn appends, compaction.

See workspacetrack/store.py for the crash rules these check.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_cli

from .track_helpers import L, write
from gitrefs.produced_scope import produced_scope as compute_produced_scope
from gitrefs.persist.killpoint import KILL_ENV
from workspacetrack import TrackError, Tracker
from workspacetrack import store as store_mod
from workspacetrack.changes import changed_paths



def run_dir(store: Path, run: str = "run-1") -> Path:
    return store / "runs" / run


def labels(t: Tracker) -> list[str]:
    return [lbl for s in t.snapshots() for lbl in s.labels]


def test_boundaries_append_one_line_and_leave_state_json_alone(tracker: Tracker, ws: Path, store: Path) -> None:
    tracker.capture(L("pre:a:0"))
    state_json = run_dir(store) / "state.json"
    st = os.stat(state_json)
    before = state_json.read_bytes()
    for i in range(5):
        write(ws, f"out{i}.txt", str(i))
        tracker.capture(L(f"nodes:a{i}:0"))
    assert state_json.read_bytes() == before and os.stat(state_json).st_ino == st.st_ino
    lines = (run_dir(store) / "state.log").read_bytes().splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [1, 2, 3, 4, 5]
    # another process (a fresh tracker) sees all of it
    assert labels(Tracker(store, ws, "run-1")) == ["pre:a:0"] + [f"nodes:a{i}:0" for i in range(5)]


def test_a_format_1_state_without_log_is_read_and_extended(tracker: Tracker, ws: Path, store: Path) -> None:
    tracker.capture(L("pre:a:0"))
    write(ws, "out.txt", "1")
    tracker.capture(L("nodes:a:0"))
    tracker.close()
    # rewrite the run as a format-1 writer left it: everything in state.json, no log, no log_seq
    state = Tracker(store, ws, "run-1").store.load_state()
    assert state is not None
    doc = json.loads(state.model_dump_json())
    doc["format_version"] = 1
    del doc["log_seq"]
    for rec in doc["snapshots"].values():
        del rec["changed"]
    (run_dir(store) / "state.json").write_text(json.dumps(doc, indent=2))
    (run_dir(store) / "state.log").unlink()
    old = Tracker(store, ws, "run-1")
    assert labels(old) == ["pre:a:0", "nodes:a:0"]
    assert old.produced_scope(L("pre:a:0")).paths == {"out.txt"}  # no recorded `changed`: manifests diffed
    write(ws, "out2.txt", "2")
    old.capture(L("nodes:b:0"))
    again = Tracker(store, ws, "run-1")
    assert labels(again) == ["pre:a:0", "nodes:a:0", "nodes:b:0"]
    assert again.produced_scope(L("pre:a:0")).paths == {"out.txt", "out2.txt"}


def test_a_torn_last_line_is_ignored_then_repaired(tracker: Tracker, ws: Path, store: Path) -> None:
    tracker.capture(L("pre:a:0"))
    write(ws, "out.txt", "1")
    tracker.capture(L("nodes:a:0"))
    log = run_dir(store) / "state.log"
    good = log.read_bytes()
    line = good.splitlines()[-1]
    for torn in (line[: len(line) // 2], line + b"\0\0\0", b"\0" * 40):
        log.write_bytes(good + torn)  # what a writer killed mid-append (or a power loss) leaves
        reader = Tracker(store, ws, "run-1")
        assert labels(reader) == ["pre:a:0", "nodes:a:0"]
        write(ws, "out.txt", torn.hex()[:20])
        reader.capture(L("nodes:b:0"))
        assert log.read_bytes().startswith(good) and log.read_bytes().endswith(b"}\n")
        assert [json.loads(x)["seq"] for x in log.read_bytes().splitlines()] == [1, 2]
        assert labels(Tracker(store, ws, "run-1")) == ["pre:a:0", "nodes:a:0", "nodes:b:0"]
        log.write_bytes(good)


def test_sigkill_mid_append_leaves_the_previous_state(ws: Path, store: Path) -> None:
    common = ["--store", str(store), "--workspace", str(ws), "--run-id", "r"]

    def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli("track", *args, *common, cwd=REPO_ROOT, env=env)

    assert cli("capture", "--label", "pre:a:0").returncode == 0
    write(ws, "gen/x.txt", "x\n")
    assert cli("capture", "--label", "nodes:a:0").returncode == 0
    write(ws, "gen/y.txt", "y\n")
    killed = cli("capture", "--label", "nodes:b:0", env={KILL_ENV: "track-state-append:1"})
    assert killed.returncode == -9, killed.stderr
    log = run_dir(store, "r") / "state.log"
    assert not log.read_bytes().endswith(b"\n")  # half a line: the kill landed mid-append
    t = Tracker(store, ws, "r")
    assert labels(t) == ["pre:a:0", "nodes:a:0"]
    rec = t.capture(L("nodes:b:0"))
    assert "gen/y.txt" in t.manifest(rec.id).entries
    assert labels(Tracker(store, ws, "r")) == ["pre:a:0", "nodes:a:0", "nodes:b:0"]
    assert t.produced_scope(L("pre:a:0")).paths == {"gen/x.txt", "gen/y.txt"}


def test_compaction_folds_the_log_and_a_stale_log_is_skipped(ws: Path, store: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "_COMPACT_MIN", 3)
    t = Tracker(store, ws, "run-1")
    t.capture(L("pre:a:0"))
    log = run_dir(store) / "state.log"
    stale = prev = compacted = b""
    at = 0
    for i in range(8):
        write(ws, "out.txt", str(i))
        t.capture(L(f"nodes:a{i}:0"))
        now = log.read_bytes() if log.exists() else b""
        if prev and not now and not stale:
            # the first compaction just folded the log in and removed it: keep both sides
            stale, compacted, at = prev, (run_dir(store) / "state.json").read_bytes(), i
        prev = now
    assert stale, "no compaction happened"
    expected = ["pre:a:0"] + [f"nodes:a{i}:0" for i in range(8)]
    assert labels(Tracker(store, ws, "run-1")) == expected
    state = json.loads(compacted)
    folded = [json.loads(x)["seq"] for x in stale.splitlines()]
    assert max(folded) < state["log_seq"] and len(state["snapshots"]) == at + 2
    # a compaction killed after its rename, before removing the log: the old lines are skipped
    (run_dir(store) / "state.json").write_bytes(compacted)
    log.write_bytes(stale)
    fresh = Tracker(store, ws, "run-1")
    assert labels(fresh) == expected[: at + 2]
    write(ws, "out.txt", "last")
    fresh.capture(L("nodes:z:0"))
    assert labels(Tracker(store, ws, "run-1")) == [*expected[: at + 2], "nodes:z:0"]
    assert [json.loads(x)["seq"] for x in log.read_bytes().splitlines()] == [state["log_seq"] + 1]


def test_a_damaged_line_before_the_last_is_a_clear_error(tracker: Tracker, ws: Path, store: Path) -> None:
    tracker.capture(L("pre:a:0"))
    for i in range(2):
        write(ws, "out.txt", str(i))
        tracker.capture(L(f"nodes:a{i}:0"))
    log = run_dir(store) / "state.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"{garbage\n" + lines[1])
    with pytest.raises(TrackError, match="cannot read .*state.log"):
        Tracker(store, ws, "run-1").snapshots()


def test_recorded_changes_give_the_produced_scope_the_manifests_give(tracker: Tracker, ws: Path) -> None:
    """Scope from each snapshot's recorded ``changed`` equals the union of manifest diffs,
    through the journal (deltas) and through walks, with deletions, renames and new dirs."""
    tracker.start_watching()
    tracker.capture(L("pre:a:0"))
    write(ws, "a.txt", "a")
    (ws / "src" / "util.py").unlink()
    tracker.capture(L("nodes:a:0"))
    tracker.capture(L("pre:b:0"))
    os.rename(ws / "src", ws / "lib")
    write(ws, "deep/x/y.txt", "y")
    tracker.capture(L("nodes:b:0"))
    tracker.stop_watching()  # from here on: walks
    tracker.capture(L("pre:c:0"))
    write(ws, "a.txt", "a2")
    (ws / "README.md").unlink()
    tracker.capture(L("nodes:c:0"))
    state = tracker.store.load_state()
    assert state is not None
    assert sum(r.changed is not None for r in state.snapshots.values()) >= 3

    def by_manifests(a: str, b: str) -> set[str]:
        ma, mb = state.snapshots[a].manifest, state.snapshots[b].manifest
        return changed_paths(tracker.store.read_manifest(ma), tracker.store.read_manifest(mb))

    for pivot in ("pre:a:0", "pre:b:0", "pre:c:0"):
        expected = compute_produced_scope(tracker.chain_entries(), L(pivot), by_manifests).paths
        assert tracker.produced_scope(L(pivot)).paths == expected
        assert Tracker(tracker.store.root, ws, "run-1").produced_scope(L(pivot)).paths == expected
    assert tracker.produced_scope(L("pre:b:0")).paths >= {"lib/app.py", "src/app.py", "deep/x/y.txt"}


@pytest.mark.parametrize("method", ["batch", "fsync"])
def test_captures_and_restores_sync_exactly_what_they_wrote(ws: Path, store: Path, method: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Both durability methods (gitrefs.persist.sync_paths) leave the store and the workspace exactly as
    written: no journal-commit probe file behind, every object readable."""
    from gitrefs.persist.atomic import FSYNC_METHOD_ENV

    monkeypatch.setenv(FSYNC_METHOD_ENV, method)
    t = Tracker(store, ws, "run-1")
    t.capture(L("pre:a:0"))
    for i in range(5):
        write(ws, f"gen/{i}/f.txt", f"{method} {i}\n")
    rec = t.capture(L("nodes:a:0"))
    report = t.restore(L("pre:a:0"))
    assert len(report.removed) == 5
    leftovers = [p for root in (store, ws) for p in root.rglob("*") if "sync" in p.name and p.name.endswith(".tmp")]
    assert leftovers == []
    m = t.manifest(rec.id)
    assert all(t.read_object(m.entries[f"gen/{i}/f.txt"][0]) == f"{method} {i}\n".encode() for i in range(5))
