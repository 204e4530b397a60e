"""The restore, undo, diff and push mechanics of in-place runs (``workspacetrack.Tracker``),
behind ``TrackVersioning`` (iterion/engine/versioning.py): nothing else calls these.

The tracker's store lives under the run's directory in the run store, never in the operator's
workspace; a produced scope (the default here) leaves the operator's own work in their live
checkout alone, and leaves in place what another run of the same workspace produced.
"""

from __future__ import annotations

import difflib
import shlex
from typing import TYPE_CHECKING

from gitrefs.boundary import BoundaryLabel
from gitrefs.produced_scope import other_runs_paths
from iterion.engine.versioning_plan import FilesPlan
from iterion.engine.versioning_types import (
    CHANGED_SINCE,
    DIFF_FILE_CAP,
    DIFF_TOTAL_CAP,
    OTHER_RUN,
    FilesReport,
    LeftInPlace,
    MissingObject,
    OnPlanned,
    PushState,
    RestoreRequest,
    RestoreScope,
    Skipped,
    StateChange,
    UndoBank,
    UndoOutcome,
)
from workspacetrack.names import display, raw_paths
from workspacetrack.reasons import describe

if TYPE_CHECKING:
    from workspacetrack.models import Manifest
    from workspacetrack.store import TrackStore
    from workspacetrack.tracker import Tracker


def restore(tracker: Tracker, req: RestoreRequest, report: FilesReport, on_planned: OnPlanned | None) -> None:
    anchor, scope, protected, planned = req.anchor, req.scope, list(req.protected), req.planned
    other_runs = list(req.other_runs)
    report.ref = tracker.resolve(str(anchor)).id
    theirs = frozenset().union(*(paths for _, paths in other_runs)) if scope is RestoreScope.PRODUCED \
        else frozenset()
    if req.dry_run:
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
    report.skipped = [Skipped(display(s["path"]), describe(s["reason"], tracker.size_cap)) for s in rr.skipped]
    report.overwritten = sorted(map(display, rr.overwritten))
    name_left_in_place(report, sorted(rr.left_in_place), other_runs)
    report.left_in_place = [display(p) for p in report.left_in_place]
    report.left_in_place_details = [LeftInPlace(display(d.path), d.reason, d.run_id)
                                    for d in report.left_in_place_details]
    report.backup_ref = rr.bank
    report.in_scope = sorted(set(report.restored) | set(report.removed) | {sk.path for sk in report.skipped})
    changes = bool(report.restored or report.removed)
    report.reverted = changes and not req.dry_run  # a preview names what would change; it reverted nothing
    if not changes:
        already = f"the workspace already matches {anchor}: nothing to restore"
        report.skip_reason = empty_scope_reason(anchor) if rr.scope_empty else (rr.message or already)
        if any(d.run_id for d in report.left_in_place_details) and rr.scope_empty:
            report.skip_reason = ("every path in scope was produced by another run of this workspace too: "
                                  "left in place")


def name_left_in_place(report: FilesReport, paths: list[str], other_runs: list[tuple[str, frozenset[str]]]) -> None:
    """``left_in_place`` (paths, as before) plus one detail per path naming the other run, if any."""
    by_run = other_runs_paths(paths, other_runs)
    report.left_in_place = paths
    report.left_in_place_details = [
        LeftInPlace(p, OTHER_RUN, by_run[p]) if p in by_run else LeftInPlace(p, CHANGED_SINCE) for p in paths]


def empty_scope_reason(anchor: BoundaryLabel) -> str:
    return f"empty scope: the run recorded no change to any file from {anchor} on, so nothing was restored"


def missing_objects(tracker: Tracker, anchor: BoundaryLabel, scope: RestoreScope,
                    protected: list[str]) -> list[MissingObject]:
    return [MissingObject(p, d) for p, d in tracker.missing_for_restore(anchor, scope.value, protected)]


def undo_command(tracker: Tracker, report: FilesReport) -> str:
    """``iterion track undo`` of the overwritten paths from the bank snapshot."""
    q = shlex.quote
    assert report.backup_ref is not None
    paths = " ".join(f"--path {q(p)}" for p in report.overwritten)
    return (f"iterion track undo --store {q(str(tracker.store.root))} --workspace {q(str(tracker.workspace))} "
            f"--run-id {q(tracker.run_id)} --bank {q(report.backup_ref)} {paths}")


def undo(tracker: Tracker, bank: UndoBank) -> UndoOutcome:
    rr = tracker.undo(bank.bank, paths=list(bank.touched))
    return UndoOutcome(rr.restored, rr.removed, rr.skipped)


def push_state(tracker: Tracker) -> PushState:
    from workspacetrack.gitexport import export_snapshot

    exported = export_snapshot(tracker)
    extra: dict[str, object] = {"snapshot": exported.snapshot, "tree": exported.tree}
    if exported.skipped:
        extra["skipped"] = exported.skipped[:50]
    return PushState(exported.commit, extra)


class TrackStateReader:
    """Two recorded states (snapshots) of an in-place run, read from its track store; writes nothing."""

    def __init__(self, track: TrackStore) -> None:
        from workspacetrack.errors import UnknownSnapshotError

        self.track = track
        state = track.load_state()
        if state is None:
            raise UnknownSnapshotError(f"run {track.run_id} recorded no workspace snapshot")
        self.state = state

    def _manifest(self, snap: str) -> Manifest:
        return self.track.read_manifest(self.track.snapshot(self.state, snap).manifest)

    def changes(self, a: str, b: str) -> list[StateChange]:
        from workspacetrack.changes import diff_manifests

        return [StateChange(c.path, c.kind) for c in diff_manifests(self._manifest(a), self._manifest(b))]

    def unified_diff(self, a: str, b: str) -> tuple[str, bool]:
        from workspacetrack.changes import diff_manifests

        ma, mb = self._manifest(a), self._manifest(b)
        parts: list[str] = []
        total = 0
        for c in diff_manifests(ma, mb):
            old = self._text(c.old_hash, ma.entries.get(c.path))
            new = self._text(c.new_hash, mb.entries.get(c.path))
            if old is None or new is None:
                chunk = f"Binary or large file {c.path} {c.kind}\n"
            else:
                chunk = "".join(difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True),
                    fromfile="/dev/null" if c.kind == "added" else f"a/{c.path}",
                    tofile="/dev/null" if c.kind == "deleted" else f"b/{c.path}"))
                if c.kind == "mode_changed":
                    chunk = f"mode of {c.path} changed {oct(c.old_mode or 0)} -> {oct(c.new_mode or 0)}\n"
            if total + len(chunk) > DIFF_TOTAL_CAP:
                return "".join(parts), True
            parts.append(chunk)
            total += len(chunk)
        return "".join(parts), False

    def _text(self, digest: str | None, entry: tuple[object, ...] | None) -> str | None:
        if digest is None:
            return ""
        size = entry[2] if entry is not None and len(entry) > 2 and isinstance(entry[2], int) else 0
        if size > DIFF_FILE_CAP:
            return None
        try:
            data = self.track.objects.read(digest)
        except Exception:  # noqa: BLE001 - a missing object is shown as unreadable, not an error page
            return None
        if len(data) > DIFF_FILE_CAP or b"\0" in data[:8192]:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
