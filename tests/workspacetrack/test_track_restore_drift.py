"""A restore in a new process asks git's status what changed since the last boundary instead of
walking the whole tree (workspacetrack/drift.py, issue 13 point 3). Every test here builds the
same situation twice, in two repositories, and restores one with git's status and the other with
the full walk (the kill switch ``ITERION_TRACK_GIT_STATUS=0``): the reports, the banks and the
trees must be the same, and git's status must have been used where its checks hold (and not
where they do not: the walk is the fallback)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from workspacetrack import Tracker
from workspacetrack.capture import WARM_ENV
from workspacetrack.drift import STATUS_ENV

from ..conftest import git, make_checkout
from .track_helpers import L, write

Step = Callable[[Path], None]


def _age(root: Path) -> None:
    """Put every file's mtime in the past, so `git add` records entries that are not racy."""
    past = time.time() - 3600
    for dirpath, _dirs, files in os.walk(root):
        if ".git" in Path(dirpath).relative_to(root).parts:
            continue
        for f in files:
            os.utime(os.path.join(dirpath, f), (past, past), follow_symlinks=False)


def _index_hash(repo: Path) -> str:
    return hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, dirs, files in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir.parts[:1] == (".git",):
            continue
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(dirpath, d)))]:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            data = os.readlink(p).encode() if os.path.islink(p) else Path(p).read_bytes()
            out[str(rel_dir / name)] = (st.st_mode, data)
    return out


def _base(repo: Path) -> None:
    write(repo, ".gitignore", "*.log\nbuild/\n")
    for i in range(30):
        write(repo, f"src/m{i // 10}/f{i}.txt", f"file {i}\n")
    write(repo, "README.md", "hello\n")
    write(repo, "docs/guide.md", "guide\n")
    write(repo, "keep/empty-soon.txt", "x\n")
    _age(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")


def _node(repo: Path) -> None:
    """What a node does between pre:a and nodes:a: edits, creations, a deletion, a link, odd names."""
    write(repo, "src/m0/f1.txt", "changed by the node\n")
    write(repo, "src/m1/f12.txt", "changed by the node too\n")
    write(repo, "gen/out.txt", "generated\n")
    write(repo, "gen/deep/x.txt", "deep\n")
    write(repo, "weird\nname.txt", "newline in the name\n")
    (repo / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name\n")
    (repo / "src/m2/f25.txt").unlink()
    os.symlink("src/m0/f0.txt", repo / "alias")
    os.chmod(repo / "src/m1/f11.txt", 0o755)
    write(repo, "build/artifact.o", "ignored\n")


def _run(repo: Path, store: Path, after: Step | None = None) -> None:
    """A run that records pre:a, lets the node work, records nodes:a (each boundary by its own
    tracker, as separate processes would), then ``after`` changes the disk (a person)."""
    t = Tracker(store, repo, "r")
    t.capture(L("pre:a:0"))
    t.close()
    _node(repo)
    t = Tracker(store, repo, "r")
    t.capture(L("nodes:a:0"))
    t.close()
    if after is not None:
        after(repo)


def _pair(tmp_path: Path, after: Step | None, *, before_last: Step | None = None) -> tuple[Path, Path]:
    repos = []
    for name in ("status", "walk"):
        (tmp_path / name).mkdir()
        repo = make_checkout(tmp_path / name / "repo")
        _base(repo)
        if before_last is not None:
            before_last(repo)
        _run(repo, tmp_path / name / "store", after)
        repos.append(repo)
    return repos[0], repos[1]


def _restore(repo: Path, store: Path, monkeypatch: pytest.MonkeyPatch, *, walk: bool, scope: str = "produced",
             preview: bool = False, warm: bool = False) -> tuple[dict[str, object], Tracker]:
    # (the warm start, preferred to git's status when the stat cache allows it: only when asked)
    monkeypatch.setenv(WARM_ENV, "1" if warm else "0")
    if walk:
        monkeypatch.setenv(STATUS_ENV, "0")
    else:
        monkeypatch.delenv(STATUS_ENV, raising=False)
    t = Tracker(store, repo, "r")  # a new process's tracker: no journal, nothing in memory
    try:
        report = t.preview_restore(L("pre:a:0"), scope) if preview else t.restore(L("pre:a:0"), scope)
    finally:
        t.close()
    return report.to_json(), t


def _both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: Step | None, *, status_used: bool | str = True,
          scope: str = "produced", before_last: Step | None = None) -> dict[str, object]:
    """Preview and restore both repositories; everything must agree. Returns the report.
    ``status_used``: True, or why the restore must have walked instead."""
    a, b = _pair(tmp_path, after, before_last=before_last)
    index_before = _index_hash(a)
    pa, ta = _restore(a, tmp_path / "status" / "store", monkeypatch, walk=False, scope=scope, preview=True)
    pb, tb = _restore(b, tmp_path / "walk" / "store", monkeypatch, walk=True, scope=scope, preview=True)
    assert ta.restore_mode is not None and tb.restore_mode == "walk"
    assert ta.restore_mode == ("git status" if status_used is True else f"walk ({status_used})")
    assert pa == pb
    ra, ta = _restore(a, tmp_path / "status" / "store", monkeypatch, walk=False, scope=scope)
    rb, tb = _restore(b, tmp_path / "walk" / "store", monkeypatch, walk=True, scope=scope)
    # (after a preview that walked, the stat cache describes the disk, not the last boundary)
    assert ta.restore_mode == "git status" if status_used is True else str(ta.restore_mode).startswith("walk")
    bank_a, bank_b = ra.pop("bank"), rb.pop("bank")
    assert ra == rb
    assert {k: v for k, v in pa.items() if k != "bank"} == ra  # the preview named what the restore did
    if bank_a is not None or bank_b is not None:
        ma, mb = ta.manifest(str(bank_a)), tb.manifest(str(bank_b))
        assert ma.entries == mb.entries and ma.skipped == mb.skipped  # the same disk state banked
    assert _tree(a) == _tree(b)
    assert _index_hash(a) == index_before  # git's status never rewrote the person's index
    return ra


def test_person_edits_in_and_out_of_scope_reported_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def person(repo: Path) -> None:
        write(repo, "src/m0/f1.txt", "the person's edit of a node's file\n")   # in scope: overwritten
        write(repo, "README.md", "the person's notes\n")                       # tracked, out of scope
        write(repo, "notes/new.txt", "a new file of the person's\n")           # untracked, out of scope
        (repo / "docs/guide.md").unlink()                                      # a deletion, out of scope
        os.chmod(repo / "src/m0/f2.txt", 0o755)                                # a mode change
        (repo / "keep/empty-soon.txt").unlink()                                # a directory emptied
        write(repo, "debug.log", "ignored: never reported\n")

    report = _both(tmp_path, monkeypatch, person)
    assert report["overwritten"] == ["src/m0/f1.txt"]
    assert {"README.md", "notes/new.txt", "docs/guide.md", "src/m0/f2.txt", "keep/empty-soon.txt",
            "keep"} <= set(report["left_in_place"])  # type: ignore[arg-type]
    assert "debug.log" not in report["left_in_place"]  # type: ignore[operator]
    assert "gen/out.txt" in report["removed"] and "src/m2/f25.txt" in report["restored"]  # type: ignore[operator]
    assert "weird\nname.txt" in report["removed"] and "alias" in report["removed"]  # type: ignore[operator]


def test_nothing_changed_since_the_last_boundary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = _both(tmp_path, monkeypatch, None)
    assert report["left_in_place"] == [] and report["overwritten"] == []


def test_scope_none_reports_left_in_place_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def person(repo: Path) -> None:
        write(repo, "README.md", "edited\n")
        write(repo, "other/new.txt", "new\n")

    report = _both(tmp_path, monkeypatch, person, scope="none")
    assert report["restored"] == [] and set(report["left_in_place"]) == {"README.md", "other/new.txt"}  # type: ignore[arg-type]


def test_a_deleted_tracked_file_put_back_from_git_falls_back_to_the_walk(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted when the last boundary was recorded, then written back with its committed bytes
    by the person: clean for git, yet changed since that boundary. The index holds a path the
    boundary did not record and git does not report, so its status cannot vouch: the restore walks."""
    def deleted_before_last(repo: Path) -> None:
        (repo / "docs/guide.md").unlink()

    def put_back(repo: Path) -> None:
        write(repo, "docs/guide.md", "guide\n")  # git's index untouched

    report = _both(tmp_path, monkeypatch, put_back, before_last=deleted_before_last,
                   status_used="the index holds a path the last boundary did not record")
    assert "docs/guide.md" in report["left_in_place"]  # type: ignore[operator]


def test_an_ignore_rule_changed_since_falls_back_to_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def person(repo: Path) -> None:
        write(repo, ".gitignore", "*.log\nbuild/\n*.tmp\n")
        write(repo, "scratch.tmp", "ignored by git now, not by the run's rules\n")

    report = _both(tmp_path, monkeypatch, person, status_used="ignore rules changed")
    assert "scratch.tmp" in report["left_in_place"]  # type: ignore[operator]


def test_a_person_staging_after_the_last_boundary_falls_back_to_the_walk(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def person(repo: Path) -> None:
        write(repo, "README.md", "staged\n")
        git(repo, "add", "README.md")  # the index that vouched is not the index now

    report = _both(tmp_path, monkeypatch, person, status_used="index changed")
    assert "README.md" in report["left_in_place"]  # type: ignore[operator]


def test_global_excludes_do_not_hide_a_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's global excludes file is no rule of the run's: a file it names is still seen."""
    excludes = tmp_path / "global-ignore"
    excludes.write_text("*.swp\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    (tmp_path / "gitconfig").write_text(f"[core]\n\texcludesFile = {excludes}\n")

    def person(repo: Path) -> None:
        write(repo, ".notes.swp", "an editor's swap file\n")

    report = _both(tmp_path, monkeypatch, person)
    assert ".notes.swp" in report["left_in_place"]  # type: ignore[operator]


def test_undo_after_a_status_restore_puts_the_persons_edit_back(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def person(repo: Path) -> None:
        write(repo, "src/m0/f1.txt", "the person's edit\n")

    a, _b = _pair(tmp_path, person)
    report, t = _restore(a, tmp_path / "status" / "store", monkeypatch, walk=False)
    assert t.restore_mode == "git status" and report["overwritten"] == ["src/m0/f1.txt"]
    assert (a / "src/m0/f1.txt").read_text() == "file 1\n"
    t = Tracker(tmp_path / "status" / "store", a, "r")
    t.undo(str(report["bank"]), paths=["src/m0/f1.txt"])
    assert (a / "src/m0/f1.txt").read_text() == "the person's edit\n"


def test_attributes_that_convert_content_fall_back_to_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git compares through its filters; a file whose bytes changed only in line endings is clean
    for git under `text` conversion, yet not what the run recorded."""
    def person(repo: Path) -> None:
        write(repo, ".gitattributes", "*.md text eol=lf\n")
        write(repo, "docs/guide.md", "guide\r\n")

    report = _both(tmp_path, monkeypatch, person, status_used="git may convert content (attributes or autocrlf)")
    assert "docs/guide.md" in report["left_in_place"]  # type: ignore[operator]
