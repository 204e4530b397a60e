"""Workspace restore of a worktree run through gitrefs, on a real repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from ..conftest import git

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from iterion.engine.versioning import open_versioning
from iterion.rewind.errors import RewindError
from iterion.rewind.files import RestoreScope, check_scope, protected_paths, restore_files


def L(kind: str, node: str, it: int = 0) -> BoundaryLabel:
    return BoundaryLabel(BoundaryKind(kind), node, it)


def run_three_nodes(repo: Path, tmp_path: Path):
    """a writes a.txt, b rewrites a.txt and creates b.txt, c creates c.txt, then a pause."""
    v = open_versioning(worktree=True, workspace=repo, run_dir=tmp_path / "run", run_id="r1", start=True)
    v.mark(L("pre", "a"))
    (repo / "a.txt").write_text("a0\n")
    v.mark(L("nodes", "a"))
    v.mark(L("pre", "b"))
    (repo / "a.txt").write_text("a by b\n")
    (repo / "b.txt").write_text("b\n")
    v.mark(L("nodes", "b"))
    v.mark(L("pre", "c"))
    (repo / "c.txt").write_text("c\n")
    v.mark(L("nodes", "c"))
    v.mark(L("pause", "c"))
    return v


def test_full_revert_banks_then_commits_the_prior_tree_on_top(repo: Path, tmp_path: Path) -> None:
    v = run_three_nodes(repo, tmp_path)
    (repo / "notes.txt").write_text("a person's untracked note\n")  # after the last boundary
    (repo / "flow.bot").write_text("workflow edited\n")  # the source: protected
    head_before = git(repo, "rev-parse", "HEAD").strip()

    report = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=repo,
                           protected=protected_paths(repo, [repo / "flow.bot", tmp_path / "elsewhere.bot"]))

    assert report.reverted and report.mechanism == "gitrefs"
    assert (repo / "a.txt").read_text() == "a0\n"
    assert not (repo / "b.txt").exists() and not (repo / "c.txt").exists() and not (repo / "notes.txt").exists()
    assert (repo / "flow.bot").read_text() == "workflow edited\n"
    assert sorted(report.removed) == ["b.txt", "c.txt", "notes.txt"] and report.restored == ["a.txt"]
    # the note matched neither side of the recorded range: overwritten, recoverable from the bank
    assert report.overwritten == ["notes.txt"]
    assert report.backup_ref and report.backup_ref.endswith("/rewind/b/1")
    assert git(repo, "show", f"{report.backup_ref}:notes.txt") == "a person's untracked note\n"
    assert git(repo, "show", f"{report.backup_ref}:c.txt") == "c\n"
    # a revert, not a reset: the previous HEAD is the revert commit's parent
    assert git(repo, "rev-parse", "HEAD").strip() == report.revert_commit
    assert git(repo, "rev-parse", "HEAD~1").strip() == head_before
    assert report.ref == "refs/iterion/runs/r1/pre/b/0"


def test_nothing_to_restore_says_so(repo: Path, tmp_path: Path) -> None:
    v = open_versioning(worktree=True, workspace=repo, run_dir=tmp_path / "run", run_id="r2", start=True)
    v.mark(L("pre", "a"))
    v.mark(L("nodes", "a"))
    head = git(repo, "rev-parse", "HEAD").strip()
    report = restore_files(v, L("pre", "a"), RestoreScope.FULL, workspace=repo, protected=[])
    assert not report.reverted and "nothing to restore" in (report.skip_reason or "")
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_dry_run_and_scope_none_change_nothing(repo: Path, tmp_path: Path) -> None:
    v = run_three_nodes(repo, tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    preview = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=repo, protected=[], dry_run=True)
    assert preview.in_scope == ["a.txt", "b.txt", "c.txt"] and not preview.reverted
    none = restore_files(v, L("pre", "b"), RestoreScope.NONE, workspace=repo, protected=[])
    assert not none.reverted and "none" in (none.skip_reason or "")
    assert (repo / "c.txt").exists() and git(repo, "rev-parse", "HEAD").strip() == head


def test_produced_is_refused_on_a_worktree_run_and_unrecorded_anchor_is_refused(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(RewindError, match="refused on a worktree run"):
        check_scope(True, RestoreScope.PRODUCED)
    check_scope(False, RestoreScope.PRODUCED)
    v = run_three_nodes(repo, tmp_path)
    with pytest.raises(RewindError, match="no workspace boundary pre:zz:0"):
        restore_files(v, L("pre", "zz"), RestoreScope.FULL, workspace=repo, protected=[])
