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
from gitrefs.persist import read_model


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


# --- P as a split index over a private git dir -------------------------------------------------


def _state_of(rr: RunRefs) -> PrivateIndexState:
    return read_model(rr.ws.private_dir(rr.run_id) / "index-state.json", PrivateIndexState)


def _state(run: Run) -> PrivateIndexState:
    return _state_of(run.rr)


def _shared(gitdir: Path) -> list[str]:
    return sorted(p.name for p in gitdir.glob("sharedindex*"))


def test_split_private_index_stays_in_its_own_git_dir(tmp_path: Path) -> None:
    """P's shared index lives in the run's private git dir, never among the user's files; new
    files in existing directories, right after a boundary and within one timestamp tick, are
    all seen; when git writes a new shared index the old one goes."""
    repo = make_repo(tmp_path / "repo")
    (repo / "d").mkdir()
    for i in range(20):
        (repo / "d" / f"f{i}.txt").write_text(f"{i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "twenty")
    user_gitdir = gitdir_of(repo)
    run = Run(repo, tmp_path)
    run.check()
    private_gitdir = run.rr.ws.private_dir("r") / "gitdir"
    assert _state(run).split and len(_shared(private_gitdir)) == 1
    run.settle()
    for i in range(3):  # a directory gains a file right after each boundary, in the same tick
        (repo / "d" / f"new{i}.txt").write_text("n\n")
        assert f"d/new{i}.txt" in run.check()
        (repo / "d" / f"new{i}.txt").write_text("same size, same tick\n")
        run.check()
    first = _shared(private_gitdir)
    for i in range(20):  # entries edited in place stay in the shared index
        (repo / "d" / f"f{i}.txt").write_text(f"changed {i}\n")
    run.check()
    assert _shared(private_gitdir) == first
    for i in range(20):  # many new ones: git writes a new shared index, and drops the old
        (repo / "e" / f"g{i}.txt").parent.mkdir(exist_ok=True)
        (repo / "e" / f"g{i}.txt").write_text(f"{i}\n")
    run.check()
    assert _shared(private_gitdir) != first and len(_shared(private_gitdir)) == 1
    assert _shared(user_gitdir) == []
    assert _state(run).split


def test_a_lost_shared_index_re_seeds(tmp_path: Path) -> None:
    """A crash between git writing a new shared index and P pointing at it leaves P unreadable:
    the next boundary starts again from the user's index."""
    repo = make_repo(tmp_path / "repo")
    run = Run(repo, tmp_path)
    (repo / "a.txt").write_text("a")
    run.settle()
    private_gitdir = run.rr.ws.private_dir("r") / "gitdir"
    for p in private_gitdir.glob("sharedindex*"):
        p.unlink()
    (repo / "b.txt").write_text("b")
    assert {"a.txt", "b.txt"} <= run.check()
    assert len(_shared(private_gitdir)) == 1


def test_the_users_own_split_index(tmp_path: Path) -> None:
    """A user whose index is split: P is seeded from it (its shared part read where the user's
    git keeps it, never written), and the user's shared index files stay as they were."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "core.splitIndex", "true")
    (repo / "a.txt").write_text("a")
    git(repo, "add", "a.txt")
    user_gitdir = gitdir_of(repo)
    rr = RunRefs.start(repo, "r")

    def boundary(step: int) -> str:
        # the user's shared index files around our boundary only: the reference (a `git add` on
        # a copy of the index under the user's config) writes its own there
        before = {p.name: p.read_bytes() for p in user_gitdir.glob("sharedindex*")}
        assert before
        guarded = guarded_state(repo)
        tree = rr.write_boundary(BoundaryLabel.parse(f"nodes:n:{step}")).tree
        assert {p.name: p.read_bytes() for p in user_gitdir.glob("sharedindex*")} == before
        assert guarded_state(repo) == guarded
        assert tree == reference_tree(repo, tmp_path / "scratch")
        return tree

    (repo / "b.txt").write_text("b")
    assert {"a.txt", "b.txt"} <= tree_paths(repo, boundary(0))
    time.sleep(0.25)
    boundary(1)
    (repo / "a.txt").write_text("a2")
    boundary(2)
    assert _state_of(rr).split


def test_per_worktree_config_keeps_the_private_index_whole(tmp_path: Path) -> None:
    """A linked worktree splits P too; with a config.worktree (read from $GIT_DIR, which a
    private git dir would hide) P stays whole and that config still applies."""
    main = make_repo(tmp_path / "main")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    wt = tmp_path / "wt"
    run = Run(wt, tmp_path)
    (wt / "x.bin").write_text("x")
    run.check()
    assert _state(run).split
    run.settle()
    git(wt, "config", "extensions.worktreeConfig", "true")
    excludes = tmp_path / "wt-excludes"
    excludes.write_text("*.bin\n")
    git(wt, "config", "--worktree", "core.excludesFile", str(excludes))
    assert "x.bin" not in run.check()
    assert not _state(run).split
