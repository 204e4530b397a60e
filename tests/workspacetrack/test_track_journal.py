"""The inotify journal: a journal-driven capture equals a full walk, and falls back."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .track_helpers import L, write
from workspacetrack import Manifest, Tracker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify journal is Linux-only")


def walk_state(store: Path, ws: Path, run: str, size_cap: int = 2048, rules_of: Tracker | None = None) -> Manifest:
    """The same state captured the slow way: a fresh tracker with no journal and no cache
    (under the ignore rules in force for ``rules_of``'s run: those of its start)."""
    t = Tracker(store, ws, run, size_cap=size_cap)
    if rules_of is not None:
        t.rules.freeze(rules_of.rules.recorded())
    rec = t.capture(L("nodes:check:0"))
    assert t.last_capture is not None and t.last_capture.mode == "full"
    return t.manifest(rec.id)


def same_state(t: Tracker, snap: str, other: Manifest) -> bool:
    """Same manifest content, read back from the store (a journal capture may store a delta)."""
    fresh = Tracker(t.store.root, t.workspace, t.run_id)  # no in-memory manifests: reads from disk
    mine = fresh.manifest(snap)
    return mine.entries == other.entries and mine.skipped == other.skipped


def edits(ws: Path, tmp_path: Path) -> list[Callable[[], None]]:
    outside = tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    return [
        lambda: write(ws, "src/app.py", "print('v2')\n"),
        lambda: write(ws, "new/deep/tree/file.txt", "created with its directories\n"),
        lambda: (ws / "src/util.py").unlink(),
        lambda: os.chmod(ws / "README.md", 0o600),
        lambda: os.rename(ws / "new", ws / "renamed"),
        lambda: os.symlink("renamed/deep", ws / "shortcut"),
        lambda: write(ws, "build.log", "ignored after the next edit\n"),
        lambda: write(ws, ".gitignore", "*.log\n"),           # a rule change: full walk
        lambda: write(ws, "renamed/deep/huge.bin", b"z" * 3000),  # oversized
        lambda: shutil.rmtree(ws / "renamed"),
        lambda: os.rename(ws / "src", outside / "src"),           # a directory leaves the workspace
        lambda: os.rename(outside / "src", ws / "back"),          # ... and comes back elsewhere
        lambda: write(ws, "back/inner/x.txt", "written inside a moved-in directory\n"),
    ]


def test_journal_capture_equals_full_walk_after_every_kind_of_change(ws: Path, store: Path, tmp_path: Path) -> None:
    t = Tracker(store, ws, "live", size_cap=2048)
    t.start_watching()
    try:
        t.capture(L("pre:n:0"))
        assert t.last_capture is not None and t.last_capture.mode == "full"
        modes = []
        for i, edit in enumerate(edits(ws, tmp_path)):
            edit()
            rec = t.capture(L(f"nodes:n:{i}"))
            modes.append(t.last_capture.mode)
            assert same_state(t, rec.id, walk_state(store, ws, f"check-{i}", rules_of=t)), f"edit {i} diverged"
        # every edit but the rule change (and the capture after it re-establishing) used the journal
        assert modes.count("journal") >= len(modes) - 2
    finally:
        t.stop_watching()


def test_journal_sees_a_write_made_just_before_the_capture(ws: Path, store: Path) -> None:
    t = Tracker(store, ws, "live")
    t.start_watching()
    try:
        t.capture(L("pre:n:0"))
        for i in range(30):
            write(ws, f"burst/{i}.txt", str(i))
            rec = t.capture(L(f"nodes:n:{i}"))  # no sleep: the capture drains the kernel queue itself
            assert f"burst/{i}.txt" in t.manifest(rec.id).entries
            assert t.last_capture is not None and t.last_capture.mode == "journal"
            assert t.last_capture.examined <= 2
    finally:
        t.stop_watching()


def test_untrusted_journal_falls_back_to_the_walk(ws: Path, store: Path) -> None:
    t = Tracker(store, ws, "live", size_cap=2048)
    t.start_watching()
    try:
        t.capture(L("pre:n:0"))
        write(ws, "a.txt", "1")
        t.journal.mark_untrusted("inotify queue overflowed")  # what an IN_Q_OVERFLOW event does
        rec = t.capture(L("nodes:n:0"))
        assert t.last_capture is not None and t.last_capture.mode == "full"
        assert "overflowed" in (t.last_capture.fallback_reason or "")
        assert same_state(t, rec.id, walk_state(store, ws, "check"))
        write(ws, "b.txt", "2")
        t.capture(L("nodes:n:1"))
        assert t.last_capture.mode == "journal"  # the walk re-established it
    finally:
        t.stop_watching()


def test_delta_manifests_chain_and_rebase(ws: Path, store: Path) -> None:
    from workspacetrack.capture import MAX_DELTA_DEPTH
    t = Tracker(store, ws, "live")
    t.start_watching()
    try:
        first = t.capture(L("pre:n:0"))
        recs = []
        for i in range(MAX_DELTA_DEPTH + 2):
            write(ws, f"d/{i}.txt", str(i))
            (ws / "README.md").write_text(f"rev {i}\n")
            recs.append(t.capture(L(f"nodes:n:{i}")))
        depths = [t.store.read_manifest(r.manifest) and t.store.depth_of(r.manifest) for r in recs]
        assert max(depths) == MAX_DELTA_DEPTH and 0 in depths  # stacked, then re-based
        assert t.store.depth_of(first.manifest) == 0
        fresh = Tracker(store, ws, "live")
        for i, r in enumerate(recs):
            m = fresh.manifest(r.id)
            assert {f"d/{j}.txt" for j in range(i + 1)} <= set(m.entries)
            assert fresh.read_object(m.entries["README.md"][0]) == f"rev {i}\n".encode()
        assert [c.path for c in fresh.changes(recs[2].id, recs[5].id)] == ["README.md", "d/3.txt", "d/4.txt", "d/5.txt"]
    finally:
        t.stop_watching()


def test_a_new_process_never_trusts_a_journal(ws: Path, store: Path) -> None:
    t = Tracker(store, ws, "live")
    t.start_watching()
    t.capture(L("pre:n:0"))
    t.stop_watching()
    resumed = Tracker(store, ws, "live")  # the run resumed in a new process
    resumed.start_watching()
    try:
        write(ws, "while-down.txt", "changed while nothing watched")
        rec = resumed.capture(L("resume:n:0"))
        assert resumed.last_capture is not None and resumed.last_capture.mode == "full"
        assert "while-down.txt" in resumed.manifest(rec.id).entries
    finally:
        resumed.stop_watching()


def test_info_exclude_added_mid_run_does_not_shrink_the_capture(git_repo: Any, tmp_path: Path) -> None:
    """The rules in force are those of the run's start: info/exclude edited by a node later
    excludes nothing this run captures (so nothing it can restore is lost). A fresh repository
    (pytest-git's ``git_repo``: ``git init``, .git/info/exclude included) is all it needs."""
    repo = Path(git_repo.workspace)
    assert (repo / ".git" / "info" / "exclude").is_file()
    t = Tracker(tmp_path / "store", repo, "live")
    t.start_watching()
    try:
        write(repo, "secret.env", "s")
        rec = t.capture(L("pre:n:0"))
        assert "secret.env" in t.manifest(rec.id).entries
        write(repo, ".git/info/exclude", "secret.env\n")
        write(repo, "secret.env", "changed by the node")
        rec = t.capture(L("nodes:n:0"))
        assert "secret.env" in t.manifest(rec.id).entries
        # a new run starts under the new rules
        fresh = Tracker(tmp_path / "store", repo, "next")
        assert "secret.env" not in fresh.manifest(fresh.capture(L("pre:n:0")).id).entries
    finally:
        t.stop_watching()


def test_dead_reader_thread_falls_back_to_the_walk(ws: Path, store: Path) -> None:
    t = Tracker(store, ws, "live")
    t.start_watching()
    try:
        t.capture(L("pre:n:0"))
        # End the journal's reader thread the way a crash in it would: it stops reading.
        t.journal._stop = True
        os.write(t.journal._wake_w, b"x")
        t.journal._thread.join(timeout=5)  # type: ignore[union-attr]
        write(ws, "after-death.txt", "x")
        rec = t.capture(L("nodes:n:0"))
        assert t.last_capture is not None and t.last_capture.mode == "full"
        assert "reader thread died" in (t.last_capture.fallback_reason or "")
        assert "after-death.txt" in t.manifest(rec.id).entries
    finally:
        t.journal._stop = False
        t.stop_watching()


def test_inotify_binding_reads_the_kernel_records(tmp_path: Path) -> None:
    """Our ctypes binding (no dependency's private module): a create and a delete come back as
    records naming the file, with the masks the kernel sets."""
    from workspacetrack import inotify

    fd = inotify.init()
    try:
        wd = inotify.add_watch(fd, os.fsencode(tmp_path), 0x100 | 0x200)  # IN_CREATE | IN_DELETE
        assert wd >= 0
        (tmp_path / "a name with spaces.txt").write_text("x")
        (tmp_path / "a name with spaces.txt").unlink()
        events = list(inotify.parse_events(os.read(fd, 1 << 16)))
        assert [(w, m, n) for w, m, _c, n in events] == [
            (wd, 0x100, b"a name with spaces.txt"), (wd, 0x200, b"a name with spaces.txt")]
        assert inotify.add_watch(fd, os.fsencode(tmp_path / "missing"), 0x100) == -1
        assert inotify.last_errno() == 2  # ENOENT
        inotify.rm_watch(fd, wd)
    finally:
        os.close(fd)
