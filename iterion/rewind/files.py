"""Restoring the workspace to what the pivot started from (``pre:<pivot>:<iter>``).

The restore itself is the versioning mechanism's (``Versioning.restore``,
iterion/engine/versioning.py): a worktree run reverts through ``gitrefs`` (the whole tree; a
``produced`` scope is refused here, before anything changes), an in-place run restores through
``workspacetrack`` (``produced`` by default, so the operator's own work in their live checkout is
not reverted). This module adds what holds for every mechanism: the scope rules, the refusal of
an unrecorded anchor, the takeover interval's unattributable paths, and the undo command. The
workflow source files are always protected.
"""

from __future__ import annotations

from pathlib import Path

from gitrefs.boundary import BoundaryLabel
from iterion.engine.versioning import Versioning
from iterion.engine.versioning_plan import FilesPlan
from iterion.engine.versioning_types import (
    NONE_REASON,
    FilesReport,
    LeftInPlace,
    OnPlanned,
    OtherRuns,
    RestoreRequest,
    RestoreScope,
    Skipped,
)
from iterion.rewind.errors import RewindError

__all__ = ["NONE_REASON", "FilesReport", "LeftInPlace", "OnPlanned", "RestoreScope", "Skipped", "check_scope",
           "default_scope", "flag_unattributable", "protected_paths", "restore_files", "unattributable_paths"]


def default_scope(worktree: bool) -> RestoreScope:
    return RestoreScope.FULL if worktree else RestoreScope.PRODUCED


def check_scope(worktree: bool, scope: RestoreScope) -> None:
    """Refuse ``produced`` on a worktree run before anything is changed."""
    if worktree and scope is RestoreScope.PRODUCED:
        raise RewindError(
            "--restore-scope produced is refused on a worktree run: git reverts the whole tree or none "
            "of it, and iterion will not substitute the whole tree for a request to narrow it",
            hint="use --restore-scope full (the default for worktree runs) or --restore-scope none",
        )


def protected_paths(workspace: Path, sources: list[Path]) -> list[str]:
    """The workflow source files that live inside the workspace, relative to it (never restored)."""
    root = workspace.resolve()
    out: list[str] = []
    for src in sources:
        try:
            rel = src.resolve().relative_to(root)
        except ValueError:
            continue
        out.append(rel.as_posix())
    return sorted(set(out))


def restore_files(versioning: Versioning, anchor: BoundaryLabel, scope: RestoreScope, *, workspace: Path,
                  protected: list[str], dry_run: bool = False, on_planned: OnPlanned | None = None,
                  planned: FilesPlan | None = None, other_runs: OtherRuns | None = None) -> FilesReport:
    """Restore (or, with ``dry_run``, preview) the workspace to ``anchor`` through ``versioning``.

    ``on_planned`` is called once the restore is decided and banked, before its first write (the
    rewind records its intent there). ``planned``: apply that recorded decision again instead of
    deciding anew - finishing a restore a killed process began (every step is idempotent).
    ``other_runs``: (run id, paths) other in-place runs of the workspace produced after the
    anchor (``iterion.rewind.other_runs``); a produced scope leaves those paths in place.
    ``workspace``: the directory ``versioning`` was opened on (kept for callers' symmetry)."""
    if scope is RestoreScope.NONE:
        return FilesReport(mechanism=versioning.mechanism, scope=scope.value, anchor=str(anchor),
                           skip_reason=NONE_REASON)
    if not versioning.has(anchor):
        raise RewindError(
            f"the run recorded no workspace boundary {anchor}, so its files cannot be restored",
            hint="rewind with --restore-scope none to move the checkpoint alone",
        )
    req = RestoreRequest(anchor=anchor, scope=scope, protected=tuple(protected), dry_run=dry_run,
                         other_runs=tuple(other_runs or ()), planned=planned)
    report = versioning.restore(req, on_planned)
    flag_unattributable(versioning, anchor, report)  # a dry run too: it reports what the rewind does
    if not dry_run:
        report.undo = versioning.undo_command(report)
    return report


# --- authorship after a crash: the takeover interval ---------------------------------------

def unattributable_paths(versioning: Versioning, anchor: BoundaryLabel) -> set[str]:
    """Paths changed, after ``anchor``, in an interval a ``takeover:`` boundary ends: the run's
    process died inside it, so its writes and a person's edits there cannot be told apart
    (gitrefs.boundary). Only those intervals are diffed, so this costs nothing without one."""
    chain = versioning.chain()
    start = max((i for i, e in enumerate(chain) if e.label == anchor), default=None)
    if start is None:
        return set()
    out: set[str] = set()
    for prev, entry in zip(chain[start:], chain[start + 1:]):
        if entry.label.kind.ends_unattributable_interval and prev.state != entry.state:
            out |= versioning.changed_paths(prev.state, entry.state)
    return out


def flag_unattributable(versioning: Versioning, anchor: BoundaryLabel, report: FilesReport) -> None:
    """Whatever the restore wrote or removed among the unattributable paths is reported in
    ``overwritten`` (its pre-rewind content is in the bank): never silently taken for the run's."""
    touched = set(report.restored) | set(report.removed)
    if touched:
        report.overwritten = sorted(set(report.overwritten) | (touched & unattributable_paths(versioning, anchor)))
