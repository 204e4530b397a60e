"""Worktree boundaries with the watcher: only the reported paths are staged into the run's
private index, and the tree equals what a fresh `git add -A` on a copy of the user's index gives,
after every kind of change; on any doubt the boundary re-verifies with the full add."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from .refs_helpers import git, guarded_state, make_repo, reference_tree, write_files

from gitrefs import RunRefs
from gitrefs.boundary import BoundaryLabel
from gitrefs.private_index import _RACY_NS
from iterion.engine.versioning import GitVersioning

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify journal is Linux-only")


class Watched:
    def __init__(self, repo: Path, tmp: Path) -> None:
        self.repo, self.tmp, self.step = repo, tmp, 0
        self.v = GitVersioning(repo, "r", start=True, watch=True)
        self.refs: RunRefs = self.v.refs

    def mark(self, expect: str) -> str:
        """A boundary, taken the way ``expect`` says ("staged" or "full"), equal to git's tree."""
        before = guarded_state(self.repo)
        self.step += 1
        commit = self.v.mark(BoundaryLabel.parse(f"nodes:n:{self.step}")).state
        assert self.refs.last_snapshot == expect
        tree = git(self.repo, "rev-parse", f"{commit}^{{tree}}")
        assert tree == reference_tree(self.repo, self.tmp / "ref")
        assert guarded_state(self.repo) == before  # the user's index, HEAD, branches untouched
        return tree


@pytest.fixture
def run(tmp_path: Path) -> Watched:
    repo = make_repo(tmp_path / "repo")
    write_files(repo, {".gitignore": "*.log\nbuild/\n", "src/a.py": "a\n", "src/b.py": "b\n", "docs/x.md": "x\n",
                 "docs/deep/y.md": "y\n", "keep.txt": "k\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tree")
    # a source written just before a boundary is racy (not trusted until the next full add): let
    # the fixture's .gitignore age past the window, or the first staged mark depends on timing
    time.sleep(_RACY_NS / 1e9 + 0.05)
    w = Watched(repo, tmp_path)
    w.mark("full")  # the first boundary of a process: the full add, with the watches in place
    return w


def test_edits_additions_deletions_renames_and_ignored_files_are_staged_exactly(run: Watched) -> None:
    repo = run.repo
    assert run.mark("staged")  # nothing changed: the last tree, no git add at all
    (repo / "src" / "a.py").write_text("a2\n")
    write_files(repo, {"new/n1.txt": "n1\n", "src/c.py": "c\n"})
    (repo / "src" / "b.py").unlink()
    run.mark("staged")
    os.rename(repo / "keep.txt", repo / "kept.txt")  # a file renamed
    os.rename(repo / "docs", repo / "manual")  # a directory renamed, with a nested one
    run.mark("staged")
    write_files(repo, {"trace.log": "ignored\n", "build/out.o": "ignored\n", "manual/build/x.o": "ignored\n",
                 "manual/notes.log": "ignored\n", "manual/real.md": "real\n"})
    run.mark("staged")
    shutil.rmtree(repo / "manual")  # a directory deleted, ignored content with it
    os.symlink("src/a.py", repo / "link")
    run.mark("staged")
    (repo / "src" / "c.py").unlink()  # a file replaced by a directory, and the reverse
    write_files(repo, {"src/c.py/inner.txt": "inner\n"})
    shutil.rmtree(repo / "new")
    (repo / "new").write_text("now a file\n")
    run.mark("staged")
    write_files(repo, {"swap/a.txt": "a\n", "swap/b/c.txt": "c\n"})
    run.mark("staged")
    shutil.rmtree(repo / "swap")  # a directory replaced by a symlink to another one
    os.symlink("src", repo / "swap")
    run.mark("staged")
    os.chmod(repo / "src" / "a.py", 0o755)
    write_files(repo, {"gone-soon.txt": "g\n"})
    (repo / "gone-soon.txt").unlink()  # created and deleted between two boundaries
    run.mark("staged")
    run.v.close()


def test_doubts_re_verify_with_the_full_add(run: Watched, tmp_path: Path) -> None:
    repo = run.repo
    write_files(repo, {"src/a.py": "a3\n", "extra.log": "x\n"})
    (repo / ".gitignore").write_text("*.md\n")  # an ignore rule changed: other paths' fate with it
    # a rule file changed within a timestamp tick of a boundary is not trusted (the next boundary
    # would re-verify too): let it age past that window
    time.sleep(_RACY_NS / 1e9 + 0.05)
    run.mark("full")
    (repo / "src" / "b.py").write_text("b2\n")
    run.mark("staged")
    # a watcher overflow (what an IN_Q_OVERFLOW event records): the next boundary re-verifies
    run.v._journal.mark_untrusted("inotify queue overflowed")
    (repo / "src" / "b.py").write_text("b3\n")
    run.mark("full")
    (repo / "src" / "b.py").write_text("b4\n")
    run.mark("staged")  # re-armed by that full boundary
    git(repo, "add", "src/b.py")  # the user's index changed: P no longer stands for a copy
    (repo / "src" / "a.py").write_text("a4\n")
    run.mark("full")
    write_files(repo, {"sub/inner.txt": "i\n"})
    git(repo / "sub", "init", "-q")  # a nested repository appears: it becomes a gitlink
    git(repo / "sub", "add", "-A")
    git(repo / "sub", "commit", "-q", "-m", "sub")
    run.mark("full")
    run.v.close()
    # a restart: a new process has no journal of what happened meanwhile
    (repo / "src" / "a.py").write_text("while nobody watched\n")
    run.v = GitVersioning(repo, "r", watch=True)
    run.refs = run.v.refs
    run.mark("full")
    (repo / "src" / "a.py").write_text("watched again\n")
    run.mark("staged")
    run.v.close()


def test_in_place_edits_keep_the_tree_shape_and_later_changes_stay_exact(run: Watched) -> None:
    """Edits only (no path added or removed) skip re-reading the tree's shape; the boundaries
    after them - a new directory, a new ignore file's doubt - still give git's tree."""
    repo = run.repo
    (repo / "src" / "a.py").write_text("a2\n")
    (repo / "docs" / "deep" / "y.md").write_text("y2\n")
    run.mark("staged")
    (repo / "src" / "a.py").write_text("a3\n")
    run.mark("staged")
    write_files(repo, {"docs/deep/deeper/z.md": "z\n", "fresh/f.txt": "f\n"})
    run.mark("staged")
    (repo / "docs" / "deep" / "deeper" / "z.md").write_text("z2\n")
    run.mark("staged")
    write_files(repo, {"fresh/.gitignore": "*.txt\n"})  # an ignore file in a directory made meanwhile
    run.mark("full")
    run.v.close()


def test_rules_inside_dot_git_re_verify(run: Watched) -> None:
    """The watcher never reports .git itself: a changed .git/info/exclude or .git/config is
    caught by re-reading them, and the boundary takes the full add."""
    repo = run.repo
    write_files(repo, {"src/c.py": "c\n", "notes.tmp": "n\n"})
    run.mark("staged")
    time.sleep(_RACY_NS / 1e9 + 0.05)
    run.mark("staged")
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("*.tmp\n")
    (repo / "src" / "a.py").write_text("a5\n")
    run.mark("full")
    time.sleep(_RACY_NS / 1e9 + 0.05)
    run.mark("full")  # trusted again after the rule aged: re-armed
    git(repo, "config", "core.autocrlf", "true")
    (repo / "src" / "b.py").write_text("b5\n")
    run.mark("full")
    run.v.close()
