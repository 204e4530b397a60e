"""Helpers for the gitrefs tests: real git, real files, and the state we promise not to touch."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from tests.conftest import git as run_git


def git(cwd: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    """The tests' one git (tests/conftest.py), its output stripped: these tests compare ids and names."""
    return run_git(cwd, *args, env=env, check=check).strip()


def write_files(root: Path, spec: dict[str, str]) -> None:
    """Write each ``relative path: text`` of ``spec`` under ``root``, making its directories."""
    for rel, text in spec.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def make_repo(root: Path, *, commit: bool = True) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    if commit:
        (root / "README.md").write_text("hello\n")
        git(root, "add", "README.md")
        git(root, "commit", "-q", "-m", "initial")
    return root


def gitdir_of(workdir: Path) -> Path:
    return Path(git(workdir, "rev-parse", "--absolute-git-dir"))


def reference_tree(workdir: Path, scratch: Path) -> str:
    """What git itself records: `git add -A && git write-tree` on a copy of the real index."""
    scratch.mkdir(parents=True, exist_ok=True)
    idx = scratch / "ref-index"
    idx.unlink(missing_ok=True)
    real = gitdir_of(workdir) / "index"
    if real.exists():
        shutil.copy2(real, idx)
    env = {"GIT_INDEX_FILE": str(idx)}
    git(workdir, "add", "-A", env=env)
    return git(workdir, "write-tree", env=env)


def guarded_state(workdir: Path) -> dict[str, str]:
    """Everything a snapshot/boundary/bank/push must leave alone, as comparable strings."""
    gd = gitdir_of(workdir)
    index = gd / "index"
    return {
        "index": hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else "<none>",
        "HEAD": (gd / "HEAD").read_text(),
        "head_commit": git(workdir, "rev-parse", "-q", "--verify", "HEAD", check=False),
        "branches": git(workdir, "for-each-ref", "refs/heads", "refs/tags", "refs/remotes", "refs/stash"),
        "stash": git(workdir, "stash", "list"),
    }


def tree_paths(workdir: Path, tree: str) -> set[str]:
    out = git(workdir, "ls-tree", "-r", "-z", "--name-only", tree)
    return {p for p in out.split("\0") if p}


def all_reachable_trees(workdir: Path) -> set[str]:
    """Root trees of every commit reachable from any ref (and HEAD)."""
    out = git(workdir, "log", "--all", "--format=%T")
    return set(out.split())
