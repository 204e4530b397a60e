"""Helpers for the tracker's tests (a uniquely named module: the suite imports test dirs by basename)."""

from __future__ import annotations

import os
from pathlib import Path

from gitrefs.boundary import BoundaryLabel


def L(text: str) -> BoundaryLabel:  # noqa: N802 - reads like a literal
    return BoundaryLabel.parse(text)


def write(root: Path, rel: str, content: str | bytes, mode: int | None = None) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    p.write_bytes(content)
    if mode is not None:
        os.chmod(p, mode)
    return p


def merge_conflict(repo: Path, rel: str) -> None:
    """Leave ``repo`` (with a commit on its current branch) mid-merge with ``rel`` conflicted:
    both sides changed it since their common commit."""
    from ..conftest import git

    write(repo, rel, "base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "theirs")
    write(repo, rel, "theirs\n")
    git(repo, "commit", "-q", "-am", "theirs")
    git(repo, "checkout", "-q", "-")
    write(repo, rel, "ours\n")
    git(repo, "commit", "-q", "-am", "ours")
    git(repo, "merge", "-q", "theirs", check=False)  # the conflict: git exits 1
