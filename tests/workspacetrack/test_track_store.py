"""The store: layout refusals, content addressing, dedup, manifest fields, atomic state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .track_helpers import L, write
from workspacetrack import TrackError, Tracker
from workspacetrack.errors import StoreLayoutError
from workspacetrack.models import RunState
from workspacetrack.objects import digest_of


def test_store_inside_workspace_is_refused(ws: Path) -> None:
    with pytest.raises(StoreLayoutError, match="inside the workspace"):
        Tracker(ws / ".iterion" / "track", ws, "r")
    with pytest.raises(StoreLayoutError):
        Tracker(ws, ws, "r")
    assert not (ws / ".iterion").exists()


def test_invalid_run_id_is_refused(ws: Path, store: Path) -> None:
    with pytest.raises(TrackError, match="run id"):
        Tracker(store, ws, "bad/run")


def test_objects_are_content_addressed_and_deduplicated_across_runs(ws: Path, store: Path) -> None:
    write(ws, "dup1.txt", "same\n")
    write(ws, "dup2.txt", "same\n")
    a = Tracker(store, ws, "run-a")
    rec = a.capture(L("nodes:n:0"))
    m = a.store.read_manifest(rec.manifest)
    h = digest_of(b"same\n")
    assert m.entries["dup1.txt"][0] == m.entries["dup2.txt"][0] == h
    assert a.read_object(h) == b"same\n"
    objects = sorted(p for p in (store / "objects").rglob("*") if p.is_file())
    b = Tracker(store, ws, "run-b")
    rec_b = b.capture(L("nodes:n:0"))
    # A second run over the same tree writes no new object: same blobs, same manifest.
    assert sorted(p for p in (store / "objects").rglob("*") if p.is_file()) == objects
    assert rec_b.manifest == rec.manifest
    assert (store / "runs" / "run-a" / "state.json").exists() and (store / "runs" / "run-b" / "state.json").exists()


def test_manifest_records_hash_mode_size_target_and_skips(ws: Path, store: Path) -> None:
    write(ws, "tool.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("src/app.py", ws / "link")
    write(ws, "big.bin", b"x" * 2048)
    t = Tracker(store, ws, "r", size_cap=1024)
    rec = t.capture(L("nodes:n:0"))
    m = t.manifest(rec.id)
    h, mode, size, target = m.entries["tool.sh"]
    assert (h, mode & 0o777, size, target) == (digest_of(b"#!/bin/sh\n"), 0o755, 10, None)
    lh, lmode, lsize, ltarget = m.entries["link"]
    assert ltarget == "src/app.py" and lsize == len("src/app.py") and os.path.islink(ws / "link")
    assert lmode & 0o170000 == 0o120000
    assert m.skipped == {"big.bin": "oversized"}
    assert "big.bin" not in m.entries
    assert rec.parent is None and rec.labels == ["nodes:n:0"] and rec.created_at
    doc = json.loads((store / "runs" / "r" / "state.json").read_text())
    assert doc["format_version"] == RunState.FORMAT_VERSION and doc["snapshots"][rec.id]["manifest"] == rec.manifest


def test_snapshots_chain_on_the_head_with_a_label_map(tracker: Tracker, ws: Path) -> None:
    s1 = tracker.capture(L("pre:a:0"))
    write(ws, "out.txt", "1")
    s2 = tracker.capture(L("nodes:a:0"))
    assert s2.parent == s1.id
    state = tracker.store.load_state()
    assert state is not None
    assert state.labels == {"pre:a:0": s1.id, "nodes:a:0": s2.id}
    assert [s.id for s in tracker.snapshots()] == [s1.id, s2.id]


def test_newer_format_is_refused(tracker: Tracker, store: Path) -> None:
    tracker.capture(L("nodes:a:0"))
    path = store / "runs" / "run-1" / "state.json"
    doc = json.loads(path.read_text())
    doc["format_version"] = RunState.FORMAT_VERSION + 1
    path.write_text(json.dumps(doc))
    with pytest.raises(TrackError, match="newer than this iterion understands"):
        tracker.snapshots()


def test_unknown_snapshot_is_a_user_error(tracker: Tracker) -> None:
    tracker.capture(L("nodes:a:0"))
    with pytest.raises(TrackError, match="no snapshot or label"):
        tracker.changes("nodes:a:0", "nodes:zzz:0")


def test_read_once_equals_the_validated_read_for_full_and_delta_manifests(ws: Path, store: Path) -> None:
    """The restore's unvalidated read (``read_manifest_once``) gives, for every snapshot of a
    chain of walk deltas - additions, edits, removals, a non-UTF-8 name, a symlink - the state
    the validated ``read_manifest`` gives, read by a new process (a fresh tracker) each time."""
    write(ws, "a.txt", "a\n")
    write(ws, "dir/b.txt", "b\n")
    tr = Tracker(store, ws, "r")
    recs = [tr.capture(L("nodes:n0:0"))]
    odd = os.fsencode(str(ws)) + b"/odd-\xff.txt"
    steps = [lambda: write(ws, "c.txt", "c\n"),
             lambda: write(ws, "a.txt", "a2\n"),
             lambda: (ws / "dir" / "b.txt").unlink(),
             lambda: Path(os.fsdecode(odd)).write_text("odd\n"),
             lambda: os.symlink("a.txt", ws / "link")]
    for i, step in enumerate(steps, 1):
        step()
        recs.append(tr.capture(L(f"nodes:n{i}:0")))
    tr.close()
    digests = [r.manifest for r in recs]
    assert len(set(digests)) == len(digests)
    assert Tracker(store, ws, "r").store.depth_of(digests[-1]) >= 2  # a chain of deltas, not full ones
    for d in digests + digests[::-1]:  # in both orders: the kept base must not leak into another state
        once = Tracker(store, ws, "r").store
        checked = Tracker(store, ws, "r").store.read_manifest(d)
        got = once.read_manifest_once(d)
        assert {p: tuple(e) for p, e in got.entries.items()} == {p: tuple(e) for p, e in checked.entries.items()}
        assert got.skipped == checked.skipped and got.ids == checked.ids
    same = Tracker(store, ws, "r").store
    for d in digests + digests[::-1]:  # one process reading them all, as a restore reads two
        got = same.read_manifest_once(d)
        want = Tracker(store, ws, "r").store.read_manifest(d)
        assert {p: tuple(e) for p, e in got.entries.items()} == dict(want.entries)
