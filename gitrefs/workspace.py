"""Opening a run's workspace as a repository, and where iterion keeps per-run files in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitrefs.errors import BareRepository, NotARepository
from gitrefs.ids import validate_id


@dataclass(frozen=True)
class Workspace:
    """A non-bare repository's working tree. ``gitdir`` is per worktree; ``commondir`` is shared."""

    repo: pygit2.Repository
    workdir: Path
    gitdir: Path
    commondir: Path

    def run_dir(self, run_id: str) -> Path:
        """Shared per-run files (run record, push log): visible from every worktree."""
        return self.commondir / "iterion" / "runs" / validate_id(run_id, "run id")

    def private_dir(self, run_id: str) -> Path:
        """A run's private index and its state: per worktree (stat data is), same filesystem."""
        return self.gitdir / "iterion" / "runs" / validate_id(run_id, "run id")

    @property
    def user_index(self) -> Path:
        return self.gitdir / "index"


def open_workspace(path: Path | str) -> Workspace:
    p = Path(path)
    if not p.exists():
        raise NotARepository(f"{p.resolve()} does not exist", hint="pass --repo with the run's workspace")
    try:
        repo = pygit2.Repository(str(p))
    except (pygit2.GitError, KeyError):
        raise NotARepository(f"{p.resolve()} is not inside a git repository",
                             hint="run it in the run's worktree, or pass --repo PATH") from None
    if repo.is_bare or repo.workdir is None:
        raise BareRepository(f"{repo.path.rstrip('/')} is a bare repository; a run needs a working tree",
                             hint="use a clone or `git worktree add` a checkout of it")
    gitdir = Path(repo.path)
    common_file = gitdir / "commondir"
    commondir = gitdir
    if common_file.is_file():
        rel = common_file.read_text().strip()
        commondir = (gitdir / rel).resolve()
    return Workspace(repo=repo, workdir=Path(repo.workdir), gitdir=gitdir, commondir=commondir)
