"""A worktree iterion released after an early terminal refusal is rebuilt at its launch commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from ..conftest import git
from .rewind_runs import fake_run, loop_steps

from iterion.rewind.errors import RewindError
from iterion.rewind.files import RestoreScope
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.store import RunStatus, Store


def _worktree_run(store: Store, repo: Path, tmp_path: Path):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "iterion/run/t", str(wt))
    base = git(wt, "rev-parse", "HEAD").strip()
    doc = fake_run(store, wt, loop_steps()[:1], status=RunStatus.FAILED, restart="setup", bot_dir=repo)
    doc.worktree.branch = "iterion/run/t"  # type: ignore[union-attr]
    doc.options = {"repo_dir": str(repo)}
    store.save_run(doc, doc.version)
    return store.load_run(doc.id), wt, base


def test_released_worktree_is_rebuilt_even_with_scope_none(repo: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    doc, wt, base = _worktree_run(store, repo, tmp_path)
    git(repo, "worktree", "remove", "--force", str(wt))
    doc.worktree.released = True  # type: ignore[union-attr]
    store.save_run(doc, doc.version)

    res = rewind_run(store, RewindRequest(run_id=doc.id, node="setup", restore_scope=RestoreScope.NONE))
    assert res.files.skip_reason and wt.is_dir()
    assert git(wt, "rev-parse", "HEAD").strip() == base
    assert git(wt, "symbolic-ref", "--short", "HEAD").strip() == "iterion/run/t"
    after = store.load_run(doc.id)
    assert after.worktree is not None and not after.worktree.released
    assert after.status is RunStatus.PAUSED_OPERATOR


def test_unexpectedly_missing_worktree_is_an_error(repo: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    doc, wt, _ = _worktree_run(store, repo, tmp_path)
    git(repo, "worktree", "remove", "--force", str(wt))
    with pytest.raises(RewindError, match="missing and was not released by iterion"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="setup", restore_scope=RestoreScope.NONE))
