"""Worktree boundaries without a watcher, once the run's private index P is warm: `git status` on P
(with git's untracked cache) says what `git add -A` would change, and only that is staged. After
every kind of change the tree must equal `git add -A && git write-tree` on a fresh copy of the
user's index, the user's index, HEAD, branches and stash untouched; what status cannot say
plainly goes the full way (`git add -A` on P, or a re-seed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .refs_helpers import git, guarded_state, make_repo, reference_tree, tree_paths, write_files

from gitrefs import RunRefs
from gitrefs.boundary import BoundaryLabel
from gitrefs.private_index import _RACY_NS


class Run:
    def __init__(self, repo: Path, tmp: Path) -> None:
        self.repo, self.tmp, self.step = repo, tmp, 0
        self.rr = RunRefs.start(repo, "r")

    def mark(self, way: str) -> set[str]:
        """A boundary taken ``way`` ("status", "add", "seed"), equal to git's own tree."""
        before = guarded_state(self.repo)
        self.step += 1
        rec = self.rr.write_boundary(BoundaryLabel.parse(f"nodes:n:{self.step}"))
        assert guarded_state(self.repo) == before
        assert rec.tree == reference_tree(self.repo, self.tmp / "ref")
        assert self.rr.last_full_way == way
        return tree_paths(self.repo, rec.tree)


@pytest.fixture
def run(tmp_path: Path) -> Run:
    repo = make_repo(tmp_path / "repo")
    write_files(repo, {".gitignore": "*.log\nbuild/\n", "src/a.py": "a\n", "src/b.py": "bbbb\n", "docs/x.md": "x\n",
                 "docs/deep/y.md": "y\n", "docs/deep/z.md": "z\n", "keep.txt": "k\n", "kept.log": "tracked\n",
                 "ita.txt": "intent\n"})
    git(repo, "add", "-A")
    git(repo, "add", "-f", "kept.log")  # tracked although ignored
    git(repo, "commit", "-q", "-m", "tree")
    git(repo, "add", "-N", "ita.txt")  # intent to add: the user's index holds it empty
    time.sleep(_RACY_NS / 1e9 + 0.05)  # the sources age out of the racy window: P is trusted
    r = Run(repo, tmp_path)
    assert "ita.txt" in r.mark("seed")
    r.mark("status")  # unchanged
    return r


def test_every_kind_of_change_is_staged_exactly(run: Run) -> None:
    repo = run.repo
    with open(repo / "src" / "a.py", "a") as f:
        f.write("more\n")
    (repo / "src" / "b.py").write_text("BBBB\n")  # same size, same tick as the last index write
    run.mark("status")

    write_files(repo, {"src/new.py": "n\n", "fresh/deep/dir/x.txt": "x\n", "build/out.o": "o", "new.log": "l",
                 "fresh/deep/skip.log": "s", "we ird\nname é.txt": "odd\n"})
    paths = run.mark("status")
    assert {"src/new.py", "fresh/deep/dir/x.txt", "we ird\nname é.txt"} <= paths
    assert not {"build/out.o", "new.log", "fresh/deep/skip.log"} & paths

    (repo / "kept.log").write_text("tracked, changed\n")  # ignored, but tracked: staged
    run.mark("status")
    (repo / "kept.log").unlink()
    assert "kept.log" not in run.mark("status")

    (repo / "docs" / "x.md").unlink()
    for p in (repo / "docs" / "deep").iterdir():
        p.unlink()
    (repo / "docs" / "deep").rmdir()
    paths = run.mark("status")
    assert not any(p.startswith("docs/") for p in paths)

    (repo / "src" / "a.py").unlink()  # a file becomes a directory
    write_files(repo, {"src/a.py/inner.txt": "i\n"})
    assert "src/a.py/inner.txt" in run.mark("status")
    for p in (repo / "fresh" / "deep" / "dir").iterdir():  # a directory becomes a file
        p.unlink()
    (repo / "fresh" / "deep" / "dir").rmdir()
    (repo / "fresh" / "deep" / "dir").write_text("now a file\n")
    assert "fresh/deep/dir" in run.mark("status")

    (repo / "keep.txt").unlink()
    (repo / "keep.txt").symlink_to("src/b.py")  # a file becomes a symlink
    os.chmod(repo / "src" / "b.py", 0o755)  # and the exec bit
    run.mark("status")
    run.mark("status")  # unchanged again


def test_what_status_cannot_say_plainly_takes_the_full_way(run: Run) -> None:
    repo = run.repo
    (repo / "sub").mkdir()
    (repo / "sub" / ".gitignore").write_text("*.tmp\n")  # a rule file in a new directory: a doubt
    write_files(repo, {"sub/a.tmp": "t", "sub/b.txt": "b"})
    time.sleep(_RACY_NS / 1e9 + 0.05)  # not racy when read after the add: P stays trusted
    paths = run.mark("add")
    assert "sub/b.txt" in paths and "sub/a.tmp" not in paths
    write_files(repo, {"sub/c.tmp": "t", "sub/d.txt": "d"})
    paths = run.mark("status")  # the new directory's rules, recorded, hold
    assert "sub/d.txt" in paths and "sub/c.tmp" not in paths

    (repo / ".gitignore").write_text("*.log\nbuild/\n*.py\n")  # a rule changed: P may hold what a copy drops
    time.sleep(_RACY_NS / 1e9 + 0.05)
    paths = run.mark("seed")
    assert "src/a.py" in paths  # tracked by the user's index: kept although ignored now
    write_files(repo, {"src/later.py": "ignored now\n"})
    assert "src/later.py" not in run.mark("status")

    (repo / "sub" / ".gitignore").write_text("*.txt\n")  # a rule file of the tree, edited in place
    time.sleep(_RACY_NS / 1e9 + 0.05)
    run.mark("seed")

    # a rule outside the tree, with a plain edit beside it: status lists only the edit, the
    # sources (read while it is staged) say no, and nothing staged is kept
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("sub/\n")
    write_files(repo, {"docs/x.md": "edited\n"})
    time.sleep(_RACY_NS / 1e9 + 0.05)
    paths = run.mark("seed")
    assert "sub/b.txt" not in paths  # P tracked it, the user's index does not: ignored now, a copy drops it

    inner = repo / "vendor" / "lib"  # an embedded repository appears: a gitlink
    inner.mkdir(parents=True)
    git(inner, "init", "-q", "-b", "main")
    (inner / "f.txt").write_text("f\n")
    git(inner, "add", "-A")
    git(inner, "commit", "-q", "-m", "inner")
    assert "vendor/lib" in run.mark("add")
    (inner / "f.txt").write_text("g\n")
    git(inner, "commit", "-q", "-am", "moved")
    run.mark("add")  # P holds a gitlink: status is not asked


def test_a_bank_between_boundaries(run: Run) -> None:
    repo = run.repo
    write_files(repo, {"src/a.py": "banked\n"})
    bank = run.rr.bank("n")
    assert bank.tree == reference_tree(repo, run.tmp / "ref")
    assert run.rr.last_full_way == "status"
    # the chain head (what status compares P with) is the boundary before the bank, not P's tree:
    # status lists more, and what is staged is the same
    write_files(repo, {"src/b.py": "after the bank\n"})
    run.mark("status")
    run.mark("status")


def test_a_file_added_where_status_just_looked_is_not_lost(run: Run) -> None:
    """git's untracked cache keeps a directory's listing while its stat data is unchanged and not
    racy (not older than the index file): a file created right after status read the directory,
    in the same timestamp tick, must still be seen next time. P is dated before status looked."""
    repo = run.repo
    git(repo, "config", "core.trustctime", "false")  # the directory's mtime alone then says "unchanged"
    time.sleep(_RACY_NS / 1e9 + 0.05)
    run.mark("seed")  # the config is a source
    run.mark("status")
    (repo / "src" / "first.log").write_text("ignored\n")  # nothing to stage: status alone writes P
    tick = time.time_ns() - 50_000_000  # the directory changed a moment before status reads it
    os.utime(repo / "src", ns=(tick, tick))
    assert "src/first.log" not in run.mark("status")
    done = time.time_ns()
    assert os.stat(run.rr.ws.private_dir("r") / "index").st_mtime_ns <= done - _RACY_NS
    (repo / "src" / "second.py").write_text("2\n")
    os.utime(repo / "src", ns=(tick, tick))  # as if in the same tick: the directory's stat data unchanged
    assert "src/second.py" in run.mark("status")
