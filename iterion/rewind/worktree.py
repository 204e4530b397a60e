"""A worktree run's checkout, rebuilt when iterion deliberately released it.

After an early terminal refusal the engine may reclaim an untouched worktree and record it as
``released``; rewinding such a run rebuilds it at its original launch commit (even with
``--restore-scope none``: the replay needs somewhere to run). A checkout that is missing WITHOUT
that record, or whose git link is broken, is an error: iterion does not paper over it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from iterion.engine.errors import EngineError
from iterion.rewind.errors import RewindError
from iterion.store import RunDoc


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def _operator_repo(doc: RunDoc) -> Path:
    candidates = [doc.options.get("repo_dir"), Path(doc.file_path).parent if doc.file_path else None]
    for c in candidates:
        if c and Path(c).is_dir():
            top = _git(Path(c), "rev-parse", "--show-toplevel")
            if top.returncode == 0:
                return Path(top.stdout.strip())
    raise RewindError(f"cannot find the repository the worktree of run {doc.id} was created from",
                      hint="run the rewind from inside that repository")


def check_worktree(doc: RunDoc) -> Path:
    """The refusals of ``ensure_worktree``, reading only: the path (absent only if released or
    not created yet: lazy creation, iterion/engine/worktree.py)."""
    wt = doc.worktree
    path = Path(wt.path if wt else doc.workspace_dir)
    if wt is not None and not wt.created:
        _operator_repo(doc)
        return path  # possibly half made by a killed creation: ensure_worktree makes it again
    if path.is_dir():
        if _git(path, "rev-parse", "--git-dir").returncode != 0:
            raise RewindError(f"the worktree of run {doc.id} ({path}) has a broken git link",
                              hint="repair it with `git worktree repair`, "
                                   "or rewind with --restore-scope none")
        return path
    if wt is None or not wt.released:
        raise RewindError(f"the worktree of run {doc.id} ({path}) is missing and was not released by iterion",
                          hint="restore the checkout, or start a new run")
    _operator_repo(doc)
    return path


def ensure_worktree(doc: RunDoc) -> Path:
    """The run's worktree path, rebuilt at its launch commit if it was released. Mutates ``doc``."""
    path = check_worktree(doc)  # the same refusals, one home
    wt = doc.worktree
    if wt is not None and not wt.created:  # the replay needs somewhere to run: made now, idempotently
        from iterion.engine.worktree import add_worktree

        try:
            add_worktree(path, wt.branch, wt.base_commit, _operator_repo(doc))
        except EngineError as exc:
            raise RewindError(f"creating the worktree of run {doc.id} failed: {exc.message}") from exc
        wt.created = True
        doc.workspace_dir = str(path)
        return path
    if path.is_dir():
        return path
    assert wt is not None  # check_worktree refused a missing worktree that iterion did not release
    repo = _operator_repo(doc)
    _git(repo, "worktree", "prune")
    add = _git(repo, "worktree", "add", "-q", "-B", wt.branch, str(path), wt.base_commit)
    if add.returncode != 0:
        raise RewindError(f"rebuilding the worktree of run {doc.id} at {wt.base_commit[:12]} failed: "
                          f"{add.stderr.strip()}")
    wt.released = False
    doc.workspace_dir = str(path)
    return path
