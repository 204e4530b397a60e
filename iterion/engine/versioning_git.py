"""The restore, undo, diff and push mechanics of worktree runs (``gitrefs.RunRefs``), behind
``GitVersioning`` (iterion/engine/versioning.py): nothing else calls these.

A restore banks the workspace as it stands (uncommitted and untracked work included) under
``rewind/<node>/<seq>``, then commits the anchor's tree on top of HEAD (a revert, not a reset:
the run's own commits stay in ``git log``). Git reverts the whole tree or none of it, so a
produced scope is refused before (``iterion.rewind.files.check_scope``).
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gitrefs.boundary import BoundaryLabel
from gitrefs.persist import atomic_write_bytes
from iterion.engine.versioning_plan import FilesPlan
from iterion.engine.versioning_types import (
    DIFF_TOTAL_CAP,
    FilesReport,
    MissingObject,
    OnPlanned,
    PushState,
    RestoreRequest,
    Skipped,
    StateChange,
    UndoBank,
    UndoOutcome,
)
from workspacetrack.models import SkipReason
from workspacetrack.names import display, from_wire, raw_paths, to_wire
from workspacetrack.reasons import describe

if TYPE_CHECKING:
    import pygit2

    from gitrefs import RunRefs

GUARDED = f"{SkipReason.PROTECTED}: a workflow source file"  # put back by the rewind itself
_STATUS = {1: "added", 2: "deleted", 3: "modified", 4: "renamed", 5: "copied", 8: "typechange"}


def restore(refs: RunRefs, workspace: Path, req: RestoreRequest, report: FilesReport,
            on_planned: OnPlanned | None) -> None:
    anchor, protected, planned = req.anchor, list(req.protected), req.planned
    anchor_commit = refs.resolve(anchor)
    report.ref = _anchor_ref(refs, anchor)
    if planned is None or planned.revert is None:
        disk = refs.snapshot()  # the tree the revert banks (a tree object; nothing of the user's is written)
        changed = refs.changed_paths(anchor_commit, disk)
        report.in_scope = sorted(changed - set(protected))
        guarded = sorted(changed & set(protected))
        if not report.in_scope:
            report.skip_reason = f"the workspace already matches {anchor}: nothing to restore"
            return
        if req.dry_run:
            # the revert's own walk of the same diff, writing nothing: the preview is the plan
            kept = {rel for rel in guarded if (workspace / rel).is_file() and not (workspace / rel).is_symlink()}
            from gitrefs.worktree_apply import apply_tree_diff

            applied = apply_tree_diff(refs.repo, workspace, disk, anchor_commit, dry_run=True)
            rewritten = set(applied.written)
            report.restored = sorted(p for p in applied.written if p not in kept)
            report.removed = sorted(p for p in applied.removed if p not in rewritten and p not in kept)
            report.skipped = [Skipped(p, describe(SkipReason.GIT_UNRESTORED)) for p in sorted(applied.skipped)]
            report.skipped += [Skipped(p, GUARDED) for p in guarded]
            touched = set(report.restored) | set(report.removed)
            differs = refs.changed_paths(disk, anchor_commit) & refs.changed_paths(disk, refs.chain_head())
            report.overwritten = sorted(touched & differs)
            _display_paths(report)
            return
        # Git reverts the whole tree: keep the source files' bytes to put them back afterwards.
        saved = {rel: (workspace / rel).read_bytes() for rel in guarded
                 if (workspace / rel).is_file() and not (workspace / rel).is_symlink()}
        last: str | None = refs.chain_head()
        planned = FilesPlan(revert=refs.prepare_revert(anchor), in_scope=[to_wire(p) for p in report.in_scope],
                            guarded=[to_wire(p) for p in guarded],
                            saved={to_wire(rel): FilesPlan.encode(data) for rel, data in saved.items()}, last=last)
        if on_planned is not None:
            on_planned(planned)
    else:  # finishing a recorded revert: the scope is the recorded one, not the half-restored tree's
        report.in_scope = [from_wire(p) for p in planned.in_scope]
        guarded = [from_wire(p) for p in planned.guarded]
        saved = {from_wire(rel): data for rel, data in planned.saved_bytes().items()}
        last = planned.last
    assert planned.revert is not None
    result = refs.apply_revert(planned.revert)
    for rel, data in saved.items():
        atomic_write_bytes(workspace / rel, data)
    report.reverted = True
    report.restored = [p for p in result.restored if p not in saved]
    report.removed = [p for p in result.removed if p not in saved]
    report.skipped = [Skipped(p, describe(SkipReason.GIT_UNRESTORED)) for p in result.skipped]
    report.skipped += [Skipped(p, GUARDED) for p in guarded]
    report.revert_commit = result.revert_commit
    report.backup_ref = result.bank.ref
    bank = result.bank.commit
    # In scope, but on disk (the bank) matching neither the anchor nor the run's last boundary:
    # work that arrived after the run stopped recording. Restored anyway; the bank holds it.
    touched = set(report.restored) | set(report.removed)
    differs = refs.changed_paths(bank, anchor_commit) & refs.changed_paths(bank, last or refs.chain_head())
    report.overwritten = sorted(touched & differs)
    _display_paths(report)


def _display_paths(report: FilesReport) -> None:
    """Non-UTF-8 names in their printable form, with their exact bytes in ``raw_paths``."""
    every = [*report.restored, *report.removed, *(s.path for s in report.skipped), *report.overwritten,
             *report.left_in_place, *report.in_scope]
    report.raw_paths = raw_paths(every)
    if not report.raw_paths:
        return
    report.restored = [display(p) for p in report.restored]
    report.removed = [display(p) for p in report.removed]
    report.skipped = [Skipped(display(s.path), s.reason) for s in report.skipped]
    report.overwritten = [display(p) for p in report.overwritten]
    report.left_in_place = [display(p) for p in report.left_in_place]
    report.in_scope = [display(p) for p in report.in_scope]


def _anchor_ref(refs: RunRefs, anchor: BoundaryLabel) -> str:
    from gitrefs import layout

    return layout.boundary_ref(refs.run_id, anchor)


def _commit_time(refs: RunRefs, commit: str) -> datetime:
    import pygit2

    return datetime.fromtimestamp(refs.repo.revparse_single(commit).peel(pygit2.Commit).commit_time, UTC)


def recorded_at(refs: RunRefs, anchor: BoundaryLabel) -> str | None:
    from gitrefs.errors import GitRefsError

    try:
        return _commit_time(refs, refs.resolve(anchor)).isoformat()
    except GitRefsError:
        return None


def recorded_paths(refs: RunRefs, after: str | None) -> frozenset[str]:
    """``gitrefs.produced_scope.recorded_paths`` over the run's chain; a boundary commit's time
    (whole seconds) stands for when it was recorded."""
    from gitrefs.produced_scope import ChainEntry
    from gitrefs.produced_scope import recorded_paths as compute

    since = datetime.fromisoformat(after) if after else None

    def counts(_start: ChainEntry, end: ChainEntry) -> bool:
        return since is None or _commit_time(refs, end.state) > since

    return compute(refs.chain_entries(), refs.changed_paths, counts=counts)


def missing_objects(refs: RunRefs, anchor: BoundaryLabel) -> list[MissingObject]:
    return [MissingObject(p) for p in refs.missing_objects(anchor)]


def undo_command(refs: RunRefs, report: FilesReport, workspace: Path) -> str | None:
    """``git restore`` of the banked paths, ``rm`` of those the bank did not have."""
    import pygit2  # git-backed (worktree) runs only: an in-place rewind never loads libgit2

    assert report.backup_ref is not None
    q = shlex.quote
    tree = refs.repo.revparse_single(report.backup_ref).peel(pygit2.Tree)
    banked = [p for p in report.overwritten if _in_tree(tree, p)]
    absent = [p for p in report.overwritten if p not in banked]
    steps = []
    if banked:
        steps.append(f"git -C {q(str(workspace))} restore --source={q(report.backup_ref)} --worktree -- "
                     + " ".join(q(p) for p in banked))
    if absent:
        steps.append("rm -f -- " + " ".join(q(str(workspace / p)) for p in absent))
    return " && ".join(steps)


def _in_tree(tree: pygit2.Tree, path: str) -> bool:
    try:
        tree[path]
    except KeyError:
        return False
    return True


def undo(refs: RunRefs, bank: UndoBank, *, completing: bool) -> UndoOutcome:
    from gitrefs.errors import GitRefsError

    if not bank.revert_commit:
        raise GitRefsError("the rewind recorded no revert commit to undo")
    written, removed, skipped = refs.undo_revert(BoundaryLabel.parse(bank.anchor), bank.revert_commit, bank.bank,
                                                 completing=completing)
    return UndoOutcome(written, removed, [{"path": p, "reason": SkipReason.GIT_UNRESTORED.value} for p in skipped])


def push_state(refs: RunRefs) -> PushState:
    return PushState(str(refs.chain_head()))


class GitStateReader:
    """Two recorded states (commits) of a worktree run, read with pygit2; writes nothing."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo

    def _diff(self, a: str, b: str) -> pygit2.Diff:
        import pygit2

        tree_a = self.repo.revparse_single(a).peel(pygit2.Tree)
        return tree_a.diff_to_tree(self.repo.revparse_single(b).peel(pygit2.Tree))

    def changes(self, a: str, b: str) -> list[StateChange]:
        out = [StateChange(d.new_file.path or d.old_file.path, _STATUS.get(d.status, "modified"))
               for d in (patch.delta for patch in self._diff(a, b) if patch is not None)]
        return sorted(out, key=lambda c: c.path)

    def unified_diff(self, a: str, b: str) -> tuple[str, bool]:
        text = self._diff(a, b).patch or ""
        return (text[:DIFF_TOTAL_CAP], len(text) > DIFF_TOTAL_CAP)


def open_reader(repo_dir: str | Path) -> GitStateReader:
    import pygit2

    return GitStateReader(pygit2.Repository(str(repo_dir)))
