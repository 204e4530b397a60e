"""Reusing what git knows: index entries vouch for unread files, git's blobs are referenced, not
copied, and pinned so the user's amend + gc cannot take them (workspacetrack/gitsource.py)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from workspacetrack import Tracker
from workspacetrack.gitsource import REUSE_ENV, blob_id, pin_ref

from ..conftest import git
from .track_helpers import L, merge_conflict, write


def _age(root: Path, *rels: str) -> None:
    """Put files' mtimes in the past, so `git add` afterwards records a non-racy entry."""
    past = time.time() - 3600
    for rel in rels:
        os.utime(root / rel, (past, past))


def _index_hash(repo: Path) -> str:
    return hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()


def _content_objects(store: Path) -> set[str]:
    """Git-blob-named objects copied into the tracker's store."""
    objects = store / "objects"
    return {d.name + f.name for d in objects.iterdir() if len(d.name) == 2 for f in d.iterdir()
            if len(d.name + f.name) == 40}


def _committed_repo(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        write(repo, rel, text)
    _age(repo, *files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")


def test_index_vouches_for_files_without_reading_them(repo: Path, tmp_path: Path) -> None:
    _committed_repo(repo, {f"src/f{i}.txt": f"file {i}\n" for i in range(20)})
    store = tmp_path / "store"
    before = _index_hash(repo)
    t = Tracker(store, repo, "r")
    rec = t.capture(L("nodes:n:0"))
    m = t.manifest(rec.id)
    assert m.ids == "git"
    assert m.entries["src/f3.txt"][0] == blob_id(b"file 3\n") == git(repo, "rev-parse", "HEAD:src/f3.txt").strip()
    assert t.last_capture is not None and t.last_capture.hashed == 0  # nothing read: the index said it all
    assert _content_objects(store) == set()                           # nothing copied
    assert git(repo, "rev-parse", "--verify", pin_ref("r")).strip()
    assert _index_hash(repo) == before
    assert git(repo, "status", "--porcelain") == ""


def test_content_git_has_is_referenced_and_new_content_copied(repo: Path, tmp_path: Path) -> None:
    _committed_repo(repo, {"a.txt": "alpha\n", "b.txt": "beta\n"})
    store = tmp_path / "store"
    t = Tracker(store, repo, "r")
    t.capture(L("pre:n:0"))
    write(repo, "a.txt", "alpha\n")             # rewritten with the same bytes: stat differs, git has it
    write(repo, "new.txt", "only on disk\n")    # git has never seen it
    rec = t.capture(L("nodes:n:0"))
    m = t.manifest(rec.id)
    assert m.entries["a.txt"][0] == blob_id(b"alpha\n")
    assert _content_objects(store) == {blob_id(b"only on disk\n")}
    write(repo, "new.txt", "changed\n")
    os.remove(repo / "a.txt")
    report = t.restore(L("nodes:n:0"), scope="full")
    assert sorted(report.restored) == ["a.txt", "new.txt"]
    assert (repo / "a.txt").read_bytes() == b"alpha\n" and (repo / "new.txt").read_bytes() == b"only on disk\n"


def test_blob_recorded_by_reference_survives_commit_amend_and_gc(repo: Path, tmp_path: Path) -> None:
    """Acceptance: a file recorded by git blob reference comes back byte-identical after the
    user commits, amends and repacks/prunes; the index stays byte-identical through our work."""
    write(repo, "work.txt", "staged version, never committed as such\n")
    _age(repo, "work.txt")
    git(repo, "add", "work.txt")
    staged = git(repo, "rev-parse", ":work.txt").strip()
    store = tmp_path / "store"
    before = _index_hash(repo)
    t = Tracker(store, repo, "r")
    rec = t.capture(L("nodes:n:0"))
    assert t.manifest(rec.id).entries["work.txt"][0] == staged
    assert _content_objects(store) == set()  # by reference only
    assert _index_hash(repo) == before

    # the user goes on: commits it, amends it away, and collects everything unreachable
    git(repo, "commit", "-q", "-m", "wip")
    write(repo, "work.txt", "amended content\n")
    git(repo, "commit", "-q", "-a", "--amend", "-m", "amended")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    git(repo, "repack", "-a", "-d", "-q")
    reachable = git(repo, "rev-list", "--objects", "--branches", "--tags", "HEAD")
    assert staged not in reachable  # only iterion's pin keeps it now

    after_user = _index_hash(repo)
    report = t.restore(L("nodes:n:0"), scope="full")
    assert report.restored == ["work.txt"]
    assert (repo / "work.txt").read_bytes() == b"staged version, never committed as such\n"
    assert _index_hash(repo) == after_user  # the restore wrote the file, never the index


def test_filters_disable_the_index_shortcut(repo: Path, tmp_path: Path) -> None:
    """With eol conversion the index blob differs from the file: the file must be read."""
    write(repo, ".gitattributes", "*.txt text eol=lf\n")
    write(repo, "crlf.txt", b"one\r\ntwo\r\n")
    _age(repo, ".gitattributes", "crlf.txt")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "attrs")
    assert git(repo, "cat-file", "-p", "HEAD:crlf.txt") == "one\ntwo\n"  # git stored it converted
    t = Tracker(tmp_path / "store", repo, "r")
    rec = t.capture(L("nodes:n:0"))
    assert t.manifest(rec.id).entries["crlf.txt"][0] == blob_id(b"one\r\ntwo\r\n")
    (repo / "crlf.txt").unlink()
    t.restore(L("nodes:n:0"), scope="full")
    assert (repo / "crlf.txt").read_bytes() == b"one\r\ntwo\r\n"


def test_racily_clean_entry_is_read(repo: Path, tmp_path: Path) -> None:
    write(repo, "r.txt", "v1\n")
    git(repo, "add", "r.txt")
    future = time.time() + 3600  # an entry not older than the index: its stat vouches for nothing
    os.utime(repo / "r.txt", (future, future))
    git(repo, "update-index", "--refresh")  # keeps the entry's recorded stat in step with the file
    t = Tracker(tmp_path / "store", repo, "r")
    rec = t.capture(L("nodes:n:0"))
    assert t.last_capture is not None and t.last_capture.hashed >= 1
    assert t.manifest(rec.id).entries["r.txt"][0] == blob_id(b"v1\n")


def test_a_run_keeps_the_id_kind_it_started_with(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _committed_repo(repo, {"a.txt": "alpha\n"})
    store = tmp_path / "store"
    monkeypatch.setenv(REUSE_ENV, "0")
    t = Tracker(store, repo, "r")
    first = t.capture(L("nodes:n:0"))
    assert t.manifest(first.id).ids == "blake3"
    monkeypatch.delenv(REUSE_ENV)
    t2 = Tracker(store, repo, "r")  # e.g. resumed by a newer iterion
    write(repo, "b.txt", "beta\n")
    second = t2.capture(L("nodes:n:1"))
    assert t2.manifest(second.id).ids == "blake3"
    assert [c.path for c in t2.changes(first.id, second.id)] == ["b.txt"]


def test_unmerged_and_intent_to_add_index_still_pins_what_it_vouched_for(repo: Path, tmp_path: Path) -> None:
    """An index that cannot make a tree (a merge conflict) is no reason to fail a capture: the
    blobs taken from it are pinned one by one instead."""
    _committed_repo(repo, {"stable.txt": "stable\n"})
    merge_conflict(repo, "c.txt")
    write(repo, "ita.txt", "intent to add\n")
    git(repo, "add", "-N", "ita.txt")
    before = _index_hash(repo)
    t = Tracker(tmp_path / "store", repo, "r")
    m = t.manifest(t.capture(L("nodes:n:0")).id)
    assert m.entries["stable.txt"][0] == blob_id(b"stable\n")
    assert m.entries["ita.txt"][0] == blob_id(b"intent to add\n")
    pinned = git(repo, "rev-list", "--objects", pin_ref("r"))
    assert blob_id(b"stable\n") in pinned
    assert _index_hash(repo) == before
    (repo / "ita.txt").unlink()
    (repo / "c.txt").write_text("resolved\n")
    t.restore(L("nodes:n:0"), scope="full")
    assert (repo / "ita.txt").read_text() == "intent to add\n"
    assert (repo / "c.txt").read_bytes().startswith(b"<<<<<<<")


@pytest.mark.parametrize("damage", ["truncated mid-entry", "no trailer", "garbage after the header"])
def test_a_damaged_index_is_not_trusted_and_the_files_are_read(repo: Path, tmp_path: Path, damage: str) -> None:
    """A damaged .git/index (a crash mid-write of another tool, a bad disk) vouches for nothing:
    the capture reads every file itself, records the right content, and a restore brings it back."""
    _committed_repo(repo, {f"src/f{i}.txt": f"file {i}\n" for i in range(20)})
    index = repo / ".git" / "index"
    data = index.read_bytes()
    index.write_bytes({"truncated mid-entry": data[:12 + 62 * 3 + 7],
                       "no trailer": data[:len(data) - 30],
                       "garbage after the header": data[:12] + os.urandom(len(data) - 12)}[damage])
    before = _index_hash(repo)
    t = Tracker(tmp_path / "store", repo, "r")
    rec = t.capture(L("pre:n:0"))
    m = t.manifest(rec.id)
    assert m.entries["src/f3.txt"][0] == blob_id(b"file 3\n")
    assert t.last_capture is not None and t.last_capture.hashed >= 20  # read, not vouched for
    write(repo, "src/f3.txt", "overwritten\n")
    t.capture(L("nodes:n:0"))
    t.restore(L("pre:n:0"))
    assert (repo / "src/f3.txt").read_text() == "file 3\n"
    assert _index_hash(repo) == before  # the damaged index is left as it was


def test_an_index_written_with_skip_hash_is_trusted(repo: Path) -> None:
    """git's index.skipHash writes an all-zero trailer: no checksum to verify, the entries count."""
    from workspacetrack.gitsource import parse_index

    _committed_repo(repo, {"a.txt": "a\n", "b.txt": "b\n"})
    data = (repo / ".git" / "index").read_bytes()
    rows = parse_index(data, b"", 1 << 62)
    assert rows is not None and {"a.txt", "b.txt"} <= set(rows)
    assert parse_index(data[:-20] + bytes(20), b"", 1 << 62) == rows
    assert parse_index(data[:-20] + b"\x01" + bytes(19), b"", 1 << 62) is None
