"""Capture: ignore rules, what is never captured, the pre alias, and re-hashing only what changed."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import git

from .track_helpers import L, write
from workspacetrack import Tracker


def test_git_workspace_ignore_rules_at_every_level(repo: Path, tmp_path: Path) -> None:
    write(repo, ".gitignore", "*.log\nbuild/\n!keep.log\n")
    write(repo, "sub/.gitignore", "local.txt\n/anchored.txt\n")
    write(repo, "sub/deeper/anchored.txt", "not anchored here")   # '/anchored.txt' is relative to sub/
    write(repo, "sub/anchored.txt", "ignored")
    write(repo, "sub/local.txt", "ignored")
    write(repo, "sub/deeper/local.txt", "ignored too (no slash: any depth below sub/)")
    write(repo, "local.txt", "kept: sub's rules do not reach the root")
    write(repo, "a.log", "ignored")
    write(repo, "keep.log", "re-included")
    write(repo, "build/out.o", "ignored dir")
    write(repo, ".git/info/exclude", "secret.env\n")
    write(repo, "secret.env", "ignored by info/exclude")
    write(repo, ".iterionignore", "scratch/\n")
    write(repo, "scratch/tmp.txt", "ignored by .iterionignore")
    t = Tracker(tmp_path / "store", repo, "r")
    m = t.manifest(t.capture(L("nodes:n:0")).id)
    assert sorted(m.entries) == [".gitignore", ".iterionignore", "README.md", "keep.log", "local.txt",
                                 "sub/.gitignore", "sub/deeper/anchored.txt"]


def test_ignored_directory_is_pruned_without_descending(ws: Path, store: Path) -> None:
    write(ws, ".gitignore", "node_modules/\n!node_modules/keep.js\n")
    write(ws, "node_modules/keep.js", "git cannot re-include below an excluded dir")
    locked = ws / "node_modules" / "locked"
    locked.mkdir()
    os.chmod(locked, 0)  # a walk that descended would hit EACCES here and record it
    try:
        t = Tracker(store, ws, "r")
        m = t.manifest(t.capture(L("nodes:n:0")).id)
    finally:
        os.chmod(locked, 0o755)
    assert not any(p.startswith("node_modules") for p in [*m.entries, *m.skipped])


def test_git_dir_and_index_are_never_captured_nor_touched(repo: Path, tmp_path: Path) -> None:
    write(repo, "work.txt", "operator's uncommitted work\n")
    git(repo, "add", "work.txt")  # staged: the index holds the operator's intent
    write(repo, "untracked.txt", "u\n")
    index_before = (repo / ".git" / "index").read_bytes()
    status_before = git(repo, "status", "--porcelain")
    t = Tracker(tmp_path / "store", repo, "r")
    t.capture(L("pre:n:0"))
    write(repo, "produced.txt", "by the node\n")
    write(repo, "work.txt", "node rewrote it\n")
    rec = t.capture(L("nodes:n:0"))
    assert not any(p == ".git" or p.startswith(".git/") for p in t.manifest(rec.id).entries)
    report = t.restore(L("pre:n:0"))
    assert report.restored == ["work.txt"] and report.removed == ["produced.txt"]
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert git(repo, "status", "--porcelain") == status_before


def test_non_git_workspace_works(ws: Path, store: Path) -> None:
    assert not (ws / ".git").exists()
    t = Tracker(store, ws, "r")
    m = t.manifest(t.capture(L("nodes:n:0")).id)
    assert set(m.entries) == {"README.md", "src/app.py", "src/util.py"}


def test_pre_is_an_alias_of_the_head_with_no_walk(tracker: Tracker, ws: Path) -> None:
    first = tracker.capture(L("nodes:a:0"))
    write(ws, "late.txt", "written after the boundary, before pre:b")
    pre = tracker.capture(L("pre:b:0"))
    assert tracker.last_capture is not None and tracker.last_capture.mode == "alias"
    assert pre.id == first.id and pre.labels == ["nodes:a:0", "pre:b:0"]
    assert "late.txt" not in tracker.manifest("pre:b:0").entries
    assert [e.state for e in tracker.chain_entries()] == [first.id, first.id]


def test_first_pre_of_a_run_walks(tracker: Tracker) -> None:
    rec = tracker.capture(L("pre:entry:0"))
    assert tracker.last_capture is not None and tracker.last_capture.mode == "full"
    assert "README.md" in tracker.manifest(rec.id).entries


def test_only_files_whose_stat_changed_are_rehashed(tracker: Tracker, ws: Path) -> None:
    for i in range(20):
        write(ws, f"many/f{i}.txt", f"{i}\n")
    tracker.capture(L("nodes:a:0"))
    assert tracker.last_capture is not None and tracker.last_capture.hashed == 23
    tracker.capture(L("nodes:a:1"))
    assert tracker.last_capture.hashed == 0 and tracker.last_capture.reused_manifest
    write(ws, "many/f3.txt", "changed\n")
    os.chmod(ws / "many/f4.txt", 0o600)  # mode change: re-read too (cheap, and the mode is recorded)
    rec = tracker.capture(L("nodes:a:2"))
    assert tracker.last_capture.hashed == 2
    m = tracker.manifest(rec.id)
    assert m.entries["many/f4.txt"][1] & 0o777 == 0o600
    # A new process has no memory but the persisted stat cache: still nothing re-read.
    fresh = Tracker(tracker.store.root, ws, "run-1")
    fresh.capture(L("nodes:a:3"))
    assert fresh.last_capture is not None and fresh.last_capture.hashed == 0


def test_racily_clean_files_are_rehashed(ws: Path, store: Path, monkeypatch) -> None:  # noqa: ANN001
    from workspacetrack import walk
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 3600 * 10**9)  # everything is "just written"
    t = Tracker(store, ws, "r")
    t.capture(L("nodes:a:0"))
    p = ws / "src/app.py"
    st = p.stat()
    p.write_text("print('v2')\n")  # same size ...
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and same mtime: only the content differs
    rec = t.capture(L("nodes:a:1"))
    assert t.read_object(t.manifest(rec.id).entries["src/app.py"][0]) == b"print('v2')\n"


def test_oversized_files_are_listed_as_skipped(ws: Path, store: Path) -> None:
    write(ws, "data/huge.bin", b"\0" * 5000)
    t = Tracker(store, ws, "r", size_cap=4096)
    m = t.manifest(t.capture(L("nodes:a:0")).id)
    assert m.skipped == {"data/huge.bin": "oversized"}


def test_symlinks_are_recorded_not_followed(ws: Path, store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.txt", "never captured")
    os.symlink(outside, ws / "out")
    t = Tracker(store, ws, "r")
    m = t.manifest(t.capture(L("nodes:a:0")).id)
    assert m.entries["out"][3] == str(outside)
    assert not any(p.startswith("out/") for p in m.entries)


def test_fifo_is_skipped_as_special(ws: Path, store: Path) -> None:
    os.mkfifo(ws / "pipe")
    t = Tracker(store, ws, "r")
    m = t.manifest(t.capture(L("nodes:a:0")).id)
    assert m.skipped == {"pipe": "special_file"}


def test_workspace_below_the_repository_root_obeys_parent_rules(repo: Path, tmp_path: Path) -> None:
    write(repo, ".gitignore", "*.tmp\n/pkg/gen/\n")
    write(repo, "pkg/.gitignore", "local/\n")
    ws = repo / "pkg"
    write(ws, "a.py", "a")
    write(ws, "x.tmp", "ignored by the repository root's rule")
    write(ws, "gen/out.py", "ignored: anchored at the repository root")
    write(ws, "local/y.py", "ignored by pkg/.gitignore")
    t = Tracker(tmp_path / "store", ws, "r")
    m = t.manifest(t.capture(L("nodes:n:0")).id)
    assert sorted(m.entries) == [".gitignore", "a.py"]


def test_iterionignore_without_git(ws: Path, store: Path) -> None:
    write(ws, ".iterionignore", "*.cache\n")
    write(ws, "sub/.iterionignore", "!keep.cache\n")
    write(ws, "a.cache", "ignored")
    write(ws, "sub/keep.cache", "re-included one level down")
    t = Tracker(store, ws, "r")
    m = t.manifest(t.capture(L("nodes:n:0")).id)
    assert "a.cache" not in m.entries and "sub/keep.cache" in m.entries


def test_changed_size_cap_invalidates_cached_skip_verdicts(ws: Path, store: Path) -> None:
    write(ws, "mid.bin", b"m" * 3000)
    small = Tracker(store, ws, "r", size_cap=1000)
    assert small.manifest(small.capture(L("nodes:a:0")).id).skipped == {"mid.bin": "oversized"}
    large = Tracker(store, ws, "r", size_cap=10_000)  # same run, new process, larger cap
    m = large.manifest(large.capture(L("nodes:a:1")).id)
    assert "mid.bin" in m.entries and m.skipped == {}
