"""Restoring the workspace to what the pivot started from (``pre:<pivot>:<iter>``), per mechanism.

* worktree runs: through ``gitrefs`` - bank the workspace as it stands (uncommitted and
  untracked work included) under ``rewind/<node>/<seq>``, then commit the prior tree on top of
  HEAD (a revert, not a reset: the run's own commits stay in ``git log``). Git reverts the whole
  tree or none of it, so ``produced`` is refused there rather than silently widened.
* in-place runs: through ``workspacetrack`` - ``produced`` by default, so the operator's own
  work in their live checkout is not reverted.

The mechanism is the engine's choice (``iterion.engine.versioning``); this module never picks
another. The workflow source files are always protected.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from gitrefs.boundary import BoundaryLabel
from gitrefs.persist import atomic_write_bytes
from iterion.rewind.errors import RewindError
from iterion.rewind.files_plan import FilesPlan
from iterion.rewind.other_runs import CHANGED_SINCE, OTHER_RUN, attribute
from workspacetrack.models import SkipReason
from workspacetrack.names import display, from_wire, raw_paths, to_wire
from workspacetrack.reasons import describe


class RestoreScope(StrEnum):
    PRODUCED = "produced"
    FULL = "full"
    NONE = "none"


GITREFS = "gitrefs"
WORKSPACETRACK = "workspacetrack"
_GUARDED = f"{SkipReason.PROTECTED}: a workflow source file"  # put back by the rewind itself


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


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class LeftInPlace:
    """Why a path the rewind saw was not restored (``run_id``: the other run that produced it)."""

    path: str
    reason: str
    run_id: str | None = None


@dataclass
class FilesReport:
    mechanism: str  # gitrefs | workspacetrack
    scope: str
    anchor: str  # the boundary restored to, e.g. pre:implement:0
    reverted: bool = False
    restored: list[str] = field(default_factory=list)  # written back (created or changed)
    removed: list[str] = field(default_factory=list)  # did not exist at the anchor: deleted
    skipped: list[Skipped] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)  # matched neither side of the recorded range
    left_in_place: list[str] = field(default_factory=list)  # changed since the last boundary, out of scope
    # one entry per left_in_place path: why, and which other run of the workspace produced it
    left_in_place_details: list[LeftInPlace] = field(default_factory=list)
    # a dry run: what the scope covers (the preview); a restore: every path it touched or skipped
    in_scope: list[str] = field(default_factory=list)
    ref: str | None = None  # gitrefs: the anchor ref; workspacetrack: the anchor snapshot id
    revert_commit: str | None = None
    backup_ref: str | None = None  # gitrefs: the bank ref; workspacetrack: the bank snapshot id
    skip_reason: str | None = None  # why nothing was restored
    # paths above whose names are not UTF-8: display form (\xNN escapes) -> hex of the exact bytes
    raw_paths: dict[str, str] = field(default_factory=dict)
    # a shell command that puts the banked content of every ``overwritten`` path back
    undo: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


NONE_REASON = "--restore-scope none: the node replays against the tree as it stands"


OnPlanned = Callable[[FilesPlan], None]


def restore_files(versioning: Any, anchor: BoundaryLabel, scope: RestoreScope, *, workspace: Path,
                  protected: list[str], dry_run: bool = False, on_planned: OnPlanned | None = None,
                  planned: FilesPlan | None = None,
                  other_runs: list[tuple[str, frozenset[str]]] | None = None) -> FilesReport:
    """Restore (or, with ``dry_run``, preview) the workspace to ``anchor`` through ``versioning``.

    ``on_planned`` is called once the restore is decided and banked, before its first write (the
    rewind records its intent there). ``planned``: apply that recorded decision again instead of
    deciding anew - finishing a restore a killed process began (every step is idempotent).
    ``other_runs``: (run id, paths) other in-place runs of the workspace produced after the
    anchor (``iterion.rewind.other_runs``); a produced scope leaves those paths in place."""
    mechanism = versioning.mechanism
    report = FilesReport(mechanism=mechanism, scope=scope.value, anchor=str(anchor))
    if scope is RestoreScope.NONE:
        report.skip_reason = NONE_REASON
        return report
    if not versioning.has(anchor):
        raise RewindError(
            f"the run recorded no workspace boundary {anchor}, so its files cannot be restored",
            hint="rewind with --restore-scope none to move the checkpoint alone",
        )
    if mechanism == GITREFS:
        _restore_git(versioning.backend, anchor, report, workspace=workspace, protected=protected,
                     dry_run=dry_run, on_planned=on_planned, planned=planned)
    else:
        _restore_tracked(versioning.backend, anchor, scope, report, protected=protected, dry_run=dry_run,
                         on_planned=on_planned, planned=planned, other_runs=other_runs or [])
    flag_unattributable(versioning, anchor, report)  # a dry run too: it reports what the rewind does
    if not dry_run:
        report.undo = undo_command(versioning, report, workspace)
    return report


# --- authorship after a crash: the takeover interval ---------------------------------------

def unattributable_paths(versioning: Any, anchor: BoundaryLabel) -> set[str]:
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


def flag_unattributable(versioning: Any, anchor: BoundaryLabel, report: FilesReport) -> None:
    """Whatever the restore wrote or removed among the unattributable paths is reported in
    ``overwritten`` (its pre-rewind content is in the bank): never silently taken for the run's."""
    touched = set(report.restored) | set(report.removed)
    if touched:
        report.overwritten = sorted(set(report.overwritten) | (touched & unattributable_paths(versioning, anchor)))


def undo_command(versioning: Any, report: FilesReport, workspace: Path) -> str | None:
    """The command that brings the bank's content of the ``overwritten`` paths back, ready to paste
    (every argument shell-quoted). A path the bank did not have is removed again."""
    if not report.overwritten or not report.backup_ref:
        return None
    backend = versioning.backend
    q = shlex.quote
    if versioning.mechanism == GITREFS:
        import pygit2  # git-backed (worktree) runs only: an in-place rewind never loads libgit2

        tree = backend.repo.revparse_single(report.backup_ref).peel(pygit2.Tree)
        banked = [p for p in report.overwritten if _in_tree(tree, p)]
        absent = [p for p in report.overwritten if p not in banked]
        steps = []
        if banked:
            steps.append(f"git -C {q(str(workspace))} restore --source={q(report.backup_ref)} --worktree -- "
                         + " ".join(q(p) for p in banked))
        if absent:
            steps.append("rm -f -- " + " ".join(q(str(workspace / p)) for p in absent))
        return " && ".join(steps)
    paths = " ".join(f"--path {q(p)}" for p in report.overwritten)
    return (f"iterion track undo --store {q(str(backend.store.root))} --workspace {q(str(backend.workspace))} "
            f"--run-id {q(backend.run_id)} --bank {q(report.backup_ref)} {paths}")


def _in_tree(tree: Any, path: str) -> bool:
    try:
        tree[path]
    except KeyError:
        return False
    return True


# --- worktree runs: gitrefs ----------------------------------------------------------------

def _restore_git(refs: Any, anchor: BoundaryLabel, report: FilesReport, *, workspace: Path,
                 protected: list[str], dry_run: bool, on_planned: OnPlanned | None = None,
                 planned: FilesPlan | None = None) -> None:
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
        if dry_run:
            # the revert's own walk of the same diff, writing nothing: the preview is the plan
            kept = {rel for rel in guarded if (workspace / rel).is_file() and not (workspace / rel).is_symlink()}
            from gitrefs.worktree_apply import apply_tree_diff  # git-backed runs only (pygit2)

            applied = apply_tree_diff(refs.repo, workspace, disk, anchor_commit, dry_run=True)
            rewritten = set(applied.written)
            report.restored = sorted(p for p in applied.written if p not in kept)
            report.removed = sorted(p for p in applied.removed if p not in rewritten and p not in kept)
            report.skipped = [Skipped(p, describe(SkipReason.GIT_UNRESTORED)) for p in sorted(applied.skipped)]
            report.skipped += [Skipped(p, _GUARDED) for p in guarded]
            touched = set(report.restored) | set(report.removed)
            differs = refs.changed_paths(disk, anchor_commit) & refs.changed_paths(disk, refs.chain_head())
            report.overwritten = sorted(touched & differs)
            _display_paths(report)
            return
        # Git reverts the whole tree: keep the source files' bytes to put them back afterwards.
        saved = {rel: (workspace / rel).read_bytes() for rel in guarded
                 if (workspace / rel).is_file() and not (workspace / rel).is_symlink()}
        last = refs.chain_head()
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
    report.skipped += [Skipped(p, _GUARDED) for p in guarded]
    report.revert_commit = result.revert_commit
    report.backup_ref = result.bank.ref
    bank = result.bank.commit
    # In scope, but on disk (the bank) matching neither the anchor nor the run's last boundary:
    # work that arrived after the run stopped recording. Restored anyway; the bank holds it.
    touched = set(report.restored) | set(report.removed)
    differs = refs.changed_paths(bank, anchor_commit) & refs.changed_paths(bank, last)
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


def _anchor_ref(refs: Any, anchor: BoundaryLabel) -> str:
    from gitrefs import layout

    return layout.boundary_ref(refs.run_id, anchor)


# --- in-place runs: workspacetrack ---------------------------------------------------------

def _restore_tracked(tracker: Any, anchor: BoundaryLabel, scope: RestoreScope, report: FilesReport, *,
                     protected: list[str], dry_run: bool, on_planned: OnPlanned | None = None,
                     planned: FilesPlan | None = None,
                     other_runs: list[tuple[str, frozenset[str]]] | None = None) -> None:
    other_runs = other_runs or []
    report.ref = tracker.resolve(str(anchor)).id
    theirs = frozenset().union(*(paths for _, paths in other_runs)) if scope is RestoreScope.PRODUCED \
        else frozenset()
    if dry_run:
        # the same plan against the same captured disk, with nothing written: its report names
        # what the restore would restore, remove, skip, overwrite and leave in place
        rr = tracker.preview_restore(anchor, scope=scope.value, protected=protected, exclude=theirs)
    else:
        completing = planned is not None and planned.tracked is not None
        if planned is None or planned.tracked is None:
            planned = FilesPlan(tracked=tracker.prepare_restore(anchor, scope=scope.value, protected=protected,
                                                                exclude=theirs))
            if on_planned is not None:
                on_planned(planned)
        assert planned.tracked is not None
        rr = tracker.apply_prepared(planned.tracked, completing=completing)
    report.raw_paths = raw_paths([*rr.restored, *rr.removed, *(s["path"] for s in rr.skipped),
                                  *rr.overwritten, *rr.left_in_place])
    report.restored = sorted(map(display, rr.restored))
    report.removed = sorted(map(display, rr.removed))
    report.skipped = [Skipped(display(s["path"]), describe_skip(s["reason"], tracker)) for s in rr.skipped]
    report.overwritten = sorted(map(display, rr.overwritten))
    _name_left_in_place(report, sorted(rr.left_in_place), other_runs)
    report.left_in_place = [display(p) for p in report.left_in_place]
    report.left_in_place_details = [LeftInPlace(display(d.path), d.reason, d.run_id)
                                    for d in report.left_in_place_details]
    report.backup_ref = rr.bank
    report.in_scope = sorted(set(report.restored) | set(report.removed) | {sk.path for sk in report.skipped})
    changes = bool(report.restored or report.removed)
    report.reverted = changes and not dry_run  # a preview names what would change; it reverted nothing
    if not changes:
        already = f"the workspace already matches {anchor}: nothing to restore"
        report.skip_reason = _empty_scope_reason(anchor) if rr.scope_empty else (rr.message or already)
        if any(d.run_id for d in report.left_in_place_details) and rr.scope_empty:
            report.skip_reason = ("every path in scope was produced by another run of this workspace too: "
                                  "left in place")


def _name_left_in_place(report: FilesReport, paths: list[str], other_runs: list[tuple[str, frozenset[str]]]) -> None:
    """``left_in_place`` (paths, as before) plus one detail per path naming the other run, if any."""
    by_run = attribute(paths, other_runs)
    report.left_in_place = paths
    report.left_in_place_details = [
        LeftInPlace(p, OTHER_RUN, by_run[p]) if p in by_run else LeftInPlace(p, CHANGED_SINCE) for p in paths]


def describe_skip(reason: str, tracker: Any) -> str:
    return describe(reason, getattr(tracker, "size_cap", None))


def _empty_scope_reason(anchor: BoundaryLabel) -> str:
    return f"empty scope: the run recorded no change to any file from {anchor} on, so nothing was restored"
