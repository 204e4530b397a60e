"""The persisted stat cache holds only what git's index cannot vouch for, and runs over the same
tree share it by content (issue 13: store growth of a second run, resume cost)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from iterion.store.gc import _sweep
from workspacetrack import Tracker
from workspacetrack.gitsource import blob_id
from workspacetrack.store import STATCACHE_DIR, TrackStore

from ..conftest import git
from .track_helpers import L, write


def _age(root: Path, *rels: str) -> None:
    past = time.time() - 3600
    for rel in rels:
        os.utime(root / rel, (past, past))


def _commit_aged(repo: Path, n: int) -> None:
    """Commit ``src/f0.txt``..``src/f{n-1}.txt``, aged out of the racy window (their index stat vouches)."""
    tracked = {f"src/f{i}.txt": f"file {i}\n" for i in range(n)}
    for rel, text in tracked.items():
        write(repo, rel, text)
    _age(repo, *tracked)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")


def _rows(store: Path, run: str) -> dict[str, object]:
    rows: dict[str, object] = json.loads((store / "runs" / run / "statcache.json").read_bytes())["rows"]
    return rows


def test_cache_keeps_rows_the_index_cannot_vouch_for_and_runs_share_it(repo: Path, tmp_path: Path) -> None:
    _commit_aged(repo, 30)
    write(repo, "untracked.txt", "not in git\n")
    write(repo, "src/f3.txt", "edited, not staged\n")
    _age(repo, "untracked.txt", "src/f3.txt")
    store = tmp_path / "store"
    a = Tracker(store, repo, "a")
    first = a.capture(L("nodes:n:0"))
    a.close()
    assert set(_rows(store, "a")) == {"untracked.txt", "src/f3.txt"}  # the 29 others: the index's
    # a new process: the index vouches again, the small cache for the rest; nothing is re-read
    again = Tracker(store, repo, "a")
    second = again.capture(L("nodes:n:1"))
    assert again.last_capture is not None and again.last_capture.hashed == 0
    assert again.manifest(second.id).entries == again.manifest(first.id).entries
    again.close()
    # another run over the same tree writes the same cache: one file, linked from both runs
    b = Tracker(store, repo, "b")
    b.capture(L("nodes:n:0"))
    b.close()
    ca, cb = store / "runs" / "a" / "statcache.json", store / "runs" / "b" / "statcache.json"
    assert ca.read_bytes() == cb.read_bytes()
    assert os.stat(ca).st_ino == os.stat(cb).st_ino
    shared = list((store / "objects" / STATCACHE_DIR).iterdir())
    assert len(shared) == 1 and os.stat(shared[0]).st_nlink == 3


def test_gc_drops_a_shared_cache_no_run_links_any_more(tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    caches = objects / STATCACHE_DIR
    caches.mkdir(parents=True)
    (caches / "orphan").write_bytes(b"x" * 100)
    (caches / "linked").write_bytes(b"y" * 50)
    os.link(caches / "linked", tmp_path / "statcache.json")  # a kept run's cache
    count, freed = _sweep(objects, set(), dry_run=True)
    assert (count, freed) == (1, 100) and (caches / "orphan").exists()
    assert _sweep(objects, set(), dry_run=False) == (1, 100)
    assert not (caches / "orphan").exists()
    assert (tmp_path / "statcache.json").read_bytes() == b"y" * 50 and (caches / "linked").exists()


def test_index_tree_comes_from_a_valid_cache_tree_only(repo: Path, tmp_path: Path) -> None:
    from workspacetrack.gitsource import parse_index

    write(repo, "d/a.txt", "a\n")
    write(repo, "b.txt", "b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two")
    index = repo / ".git" / "index"
    root: list[str] = []
    parse_index(index.read_bytes(), b"", os.stat(index).st_mtime_ns, [], root)
    assert root == [git(repo, "rev-parse", "HEAD^{tree}").strip()]  # `git commit` leaves it valid
    write(repo, "d/a.txt", "a2\n")
    git(repo, "add", "d/a.txt")  # staging invalidates the root's entry: no id to take
    root = []
    parse_index(index.read_bytes(), b"", os.stat(index).st_mtime_ns, [], root)
    assert root == []
    # a capture on that index still pins a tree holding the staged blob (made from the entries)
    t = Tracker(tmp_path / "store", repo, "r")
    t.capture(L("nodes:n:0"))
    staged = git(repo, "rev-parse", ":d/a.txt").strip()
    assert git(repo, "rev-parse", "refs/iterion/pins/r:index/d/a.txt").strip() == staged


def test_manifest_id_kind_is_read_from_the_documents_tail(repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from workspacetrack.gitsource import REUSE_ENV
    from workspacetrack.store import TrackStore

    write(repo, "a.txt", "a\n")
    for run, reuse in (("g", "1"), ("b", "0")):
        monkeypatch.setenv(REUSE_ENV, reuse)
        t = Tracker(tmp_path / "store", repo, run)
        digest = t.capture(L("nodes:n:0")).manifest
        t.close()
        fresh = TrackStore(tmp_path / "store", run)  # a new process: nothing in memory
        assert fresh.manifest_ids(digest) == ("git" if reuse == "1" else "blake3")
        assert fresh.manifest_ids(digest) == TrackStore(tmp_path / "store", run).read_manifest(digest).ids


def test_a_new_process_finds_the_saved_manifest_only_for_the_same_state(repo: Path, tmp_path: Path) -> None:
    _commit_aged(repo, 10)
    write(repo, "mine.txt", "the run's\n")
    _age(repo, "mine.txt")
    store = tmp_path / "store"
    t = Tracker(store, repo, "r")
    first = t.capture(L("nodes:n:0")).manifest
    t.close()
    again = Tracker(store, repo, "r")  # cache rows + the same index: the saved manifest, not rebuilt
    assert again.capture(L("nodes:n:1")).manifest == first
    assert again.last_capture is not None and again.last_capture.reused_manifest
    again.close()
    # files the index vouched for are gone: the cache's own rows still all match, the count does not
    (repo / "src" / "f1.txt").unlink()
    (repo / "src" / "f2.txt").unlink()
    later = Tracker(store, repo, "r")
    rec = later.capture(L("nodes:n:2"))
    assert rec.manifest != first and not later.last_capture.reused_manifest  # type: ignore[union-attr]
    assert set(later.manifest(rec.id).entries) == set(later.manifest("nodes:n:0").entries) - {"src/f1.txt", "src/f2.txt"}
    later.close()
    # the index itself changed (a commit): vouching by another index never stands for the old one
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "deleted")
    (repo / "src" / "f3.txt").write_text("changed\n")
    _age(repo, "src/f3.txt")
    last = Tracker(store, repo, "r")
    rec = last.capture(L("nodes:n:3"))
    assert last.manifest(rec.id).entries["src/f3.txt"][0] == blob_id(b"changed\n")
    last.close()


def test_cache_saved_after_each_walk_matches_the_index_step_by_step(repo: Path, tmp_path: Path) -> None:
    """The rows a walk carries over from the previous save (only the changed paths re-checked
    against the index) are what a full check against the index gives; a new process resuming
    from that cache records the same state without reading any file."""
    _commit_aged(repo, 12)

    def grow(rel: str) -> None:
        p = repo / rel
        p.write_bytes(p.read_bytes() + b"more\n")

    def replace_by_empty_dir(rel: str) -> None:
        (repo / rel).unlink()
        (repo / rel).mkdir()

    steps = [
        ("modified", lambda: grow("src/f1.txt")),
        ("untracked added", lambda: write(repo, "new.txt", "new\n")),
        ("tracked deleted", lambda: (repo / "src/f2.txt").unlink()),
        ("reverted to the committed bytes (stat differs from the index)",
         lambda: (repo / "src/f1.txt").write_text("file 1\n")),
        ("staged with git add, then another edit",
         lambda: (git(repo, "add", "-A"), grow("src/f3.txt"))),
        ("unchanged", lambda: None),
        ("tracked file replaced by an empty directory", lambda: replace_by_empty_dir("src/f4.txt")),
        ("committed", lambda: (git(repo, "add", "-A"), git(repo, "commit", "-q", "-m", "more"), grow("src/f5.txt"))),
    ]
    store = tmp_path / "store"
    live = Tracker(store, repo, "r")
    live.capture(L("nodes:n:0"))
    for i, (what, change) in enumerate(steps, start=1):
        change()
        rec = live.capture(L(f"nodes:n:{i}"))
        capturer = live._capturer
        assert capturer._rows is not None
        want = capturer._beyond_index(capturer._rows)
        assert want is not None, what  # the index vouches for most files at every step
        assert set(_rows(store, "r")) == set(want[0]), what
        assert capturer._beyond is not None and set(capturer._beyond[1]) == set(want[0]), what
        fresh = Tracker(store, repo, "r")  # a new process: the saved cache plus the index
        again = fresh.capture(L(f"resume:n:{i}"))
        assert fresh.last_capture is not None and fresh.last_capture.hashed == 0, what
        assert fresh.manifest(again.id).entries == live.manifest(rec.id).entries, what
        fresh.close()
    live.close()


def test_a_new_process_re_reading_racy_rows_finds_the_saved_manifest(repo: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A row saved racily clean is re-read by the next process; same bytes: the state is the
    one saved, recorded under the same manifest (no second manifest, no new cache file)."""
    from workspacetrack import walk

    write(repo, "src/tracked.txt", "tracked\n")
    _age(repo, "src/tracked.txt")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    write(repo, "mine.txt", "the run's\n")
    store = tmp_path / "store"
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 3600 * 10**9)  # mine.txt: just written, racy
    t = Tracker(store, repo, "r")
    first = t.capture(L("nodes:n:0")).manifest
    t.close()
    assert _rows(store, "r")["mine.txt"][2] is False  # type: ignore[index]
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 0)
    caches = set((store / "objects" / STATCACHE_DIR).iterdir())
    again = Tracker(store, repo, "r")
    assert again.capture(L("nodes:n:1")).manifest == first
    assert again.last_capture is not None and again.last_capture.hashed == 1 and again.last_capture.reused_manifest
    again.close()
    assert _rows(store, "r")["mine.txt"][2] is True  # type: ignore[index]
    # the same bytes changed under the same size: another manifest
    (repo / "mine.txt").write_text("the RUN's\n")
    later = Tracker(store, repo, "r")
    assert later.capture(L("nodes:n:2")).manifest != first
    later.close()
    assert len(set((store / "objects" / STATCACHE_DIR).iterdir()) - caches) >= 1


def test_a_resumed_process_stores_its_next_change_as_a_delta_on_the_saved_manifest(repo: Path, tmp_path: Path) -> None:
    _commit_aged(repo, 20)
    store = tmp_path / "store"
    t = Tracker(store, repo, "r")
    first = t.capture(L("nodes:n:0")).manifest
    t.close()
    resumed = Tracker(store, repo, "r")
    assert resumed.capture(L("resume:n:1")).manifest == first  # the saved rows plus the index
    (repo / "src/f7.txt").write_text("changed after the resume\n")
    (repo / "src/f8.txt").unlink()
    rec = resumed.capture(L("nodes:n:2"))
    assert sorted(rec.changed or []) == ["src/f7.txt", "src/f8.txt"]
    resumed.close()
    cold = Tracker(tmp_path / "cold", repo, "c")
    want = cold.manifest(cold.capture(L("nodes:n:0")).id)
    disk = TrackStore(store, "r")
    got = disk.read_manifest(rec.manifest)
    assert (got.entries, got.skipped) == (want.entries, want.skipped)
    assert disk.depth_of(rec.manifest) == 1
