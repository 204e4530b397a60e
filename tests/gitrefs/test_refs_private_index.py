"""The run's private index (kept across boundaries) must give git's tree on a FRESH copy of the index.

Each test walks one run through a sequence of workspace changes; after every step the snapshot
must equal `git add -A && git write-tree` on a copy of the user's index taken right then, and the
user's index, HEAD, branches and stash must be untouched.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .refs_helpers import git, gitdir_of, guarded_state, make_repo, reference_tree, tree_paths

from gitrefs import RunRefs
from gitrefs.boundary import BoundaryLabel
from gitrefs.private_index import PrivateIndexState
from persist import read_model


def age(*paths: Path) -> None:
    """Make files look written long before the next index write (not racily clean: git trusts
    their stat data instead of re-hashing them)."""
    for p in paths:
        os.utime(p, (1_600_000_000, 1_600_000_000), follow_symlinks=False)


class Run:
    """A run whose every step is checked against git's own answer."""

    def __init__(self, repo: Path, tmp: Path) -> None:
        self.repo, self.tmp = repo, tmp
        self.rr = RunRefs.start(repo, "r")
        self.step = 0

    def check(self) -> set[str]:
        before = guarded_state(self.repo)
        rec = self.rr.write_boundary(BoundaryLabel.parse(f"nodes:n:{self.step}"))
        self.step += 1
        assert guarded_state(self.repo) == before
        assert rec.tree == reference_tree(self.repo, self.tmp / "scratch")
        return tree_paths(self.repo, rec.tree)

    def settle(self) -> set[str]:
        """A boundary after the dust settled, so the NEXT one reuses the kept index (no re-seed):
        the hazard a test sets up next must then be caught by the kept index's own checks."""
        time.sleep(0.25)  # past the racy window of the sources the last steps wrote
        paths = self.check()
        state = read_model(self.rr.ws.private_dir("r") / "index-state.json", PrivateIndexState)
        assert state.trusted
        return paths


def test_a_captured_file_that_becomes_ignored_is_dropped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    (repo / "out").mkdir()
    (repo / "out" / "a.log").write_text("a")
    (repo / "out" / "b.txt").write_text("b")
    assert {"out/a.log", "out/b.txt"} <= run.check()
    assert {"out/a.log", "out/b.txt"} <= run.settle()  # unchanged boundary
    (repo / ".gitignore").write_text("*.log\n")
    paths = run.check()
    assert "out/a.log" not in paths and "out/b.txt" in paths
    (repo / ".gitignore").write_text("")
    assert "out/a.log" in run.check()


def test_ignore_sources_outside_the_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    (repo / "sub").mkdir()
    for name in ("x.bak", "secret.txt", "sub/own.tmp", "sub/keep.txt"):
        (repo / name).write_text(name)
    assert {"x.bak", "secret.txt", "sub/own.tmp"} <= run.settle()
    exclude = gitdir_of(repo) / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("secret.txt\n")
    assert "secret.txt" not in run.check()
    excludes = tmp_path / "global excludes"
    excludes.write_text("*.bak\n")
    run.settle()
    git(repo, "config", "core.excludesFile", str(excludes))
    assert "x.bak" not in run.check()
    # A .gitignore that ignores itself is never in the tree, yet rules its directory.
    (repo / "sub" / ".gitignore").write_text(".gitignore\n")
    paths = run.settle()
    assert "sub/own.tmp" in paths and "sub/.gitignore" not in paths
    (repo / "sub" / ".gitignore").write_text(".gitignore\n*.tmp\n")
    paths = run.check()
    assert "sub/own.tmp" not in paths and "sub/keep.txt" in paths


def test_user_index_changes_apply(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("*.o\n")
    (repo / "forced.o").write_text("tracked although ignored")
    git(repo, "add", ".gitignore")
    git(repo, "add", "-f", "forced.o")
    git(repo, "commit", "-q", "-m", "forced")
    run = Run(repo, tmp_path)
    assert "forced.o" in run.settle()
    # Deleted, captured as gone, then back: a copy of the user's index re-adds it (it is tracked).
    (repo / "forced.o").unlink()
    assert "forced.o" not in run.settle()
    (repo / "forced.o").write_text("back")
    assert "forced.o" in run.check()
    # The user untracks it: now it is ignored like any other .o file.
    run.settle()
    git(repo, "rm", "-q", "--cached", "forced.o")
    assert "forced.o" not in run.check()
    # The user stages something: the copy carries it.
    (repo / "staged.txt").write_text("v1")
    git(repo, "add", "staged.txt")
    (repo / "staged.txt").write_text("v2")
    assert "staged.txt" in run.check()
    # A user's `git status` refreshes the index (a rewrite with the same entries).
    git(repo, "status", "--porcelain")
    run.check()


def test_quick_same_size_rewrites_and_type_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    for i in range(6):  # same size, same second: git's racy-entry rule must see every one
        (repo / "f.txt").write_text(f"v{i}")
        (repo / "README.md").write_text(f"r{i}\n")
        run.check()
    (repo / "f.txt").unlink()
    (repo / "f.txt").mkdir()
    (repo / "f.txt" / "inside").write_text("i")
    assert "f.txt/inside" in run.check()
    shutil.rmtree(repo / "f.txt")
    os.symlink("README.md", repo / "f.txt")
    run.check()
    (repo / "f.txt").unlink()
    os.chmod(repo / "README.md", 0o755)
    run.check()


def test_embedded_repo_that_loses_its_git_dir(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    make_repo(repo / "vendor" / "lib")
    run.check()  # a gitlink
    run.settle()
    shutil.rmtree(repo / "vendor" / "lib" / ".git")
    assert "vendor/lib/README.md" in run.check()  # now plain files


def test_a_damaged_or_missing_private_index_is_rebuilt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    (repo / "a.txt").write_text("a")
    run.check()
    private = run.rr.ws.private_dir("r")
    (private / "index").write_bytes(b"not an index")
    (repo / "b.txt").write_text("b")
    assert {"a.txt", "b.txt"} <= run.check()
    (private / "index").unlink()
    (private / "index-state.json").write_text("{garbage")
    (repo / "a.txt").unlink()
    assert "a.txt" not in run.check()


def test_attributes_that_change_how_a_captured_file_hashes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    (repo / "win.txt").write_bytes(b"a\r\nb\r\n")
    age(repo / "win.txt")
    run.check()
    run.settle()
    (repo / ".gitattributes").write_text("*.txt text eol=lf\n")
    run.check()  # a fresh copy re-hashes win.txt normalised; the kept index must not keep CRLF


def test_a_captured_directory_that_becomes_a_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    (repo / "lib").mkdir()
    (repo / "lib" / "a.txt").write_text("a")
    age(repo / "lib" / "a.txt")
    assert "lib/a.txt" in run.check()
    run.settle()
    git(repo / "lib", "init", "-q")
    git(repo / "lib", "add", "a.txt")
    git(repo / "lib", "commit", "-q", "-m", "own history")
    run.check()
