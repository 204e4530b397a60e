"""``iterion rewind``: move a parked run's checkpoint back onto a node it already executed.

Order of operations, each step refusing before anything is changed where it can:

1. take the per-run execution lock (a resume or a live engine holds it: refused);
2. read the run document and check its status against the status table;
3. require a checkpoint with something executed;
4. resolve the pivot (``--node`` or ``--auto``), promote it out of any fan-out body, compute the
   invalidated nodes against the workflow source as it is NOW (no hash check: you rewind
   precisely because you edited it);
5. claim the run with a compare-and-swap on its document (a concurrent writer loses the race
   instead of being rewound out from under itself);
6. restore the files, rewind the checkpoint, park the run (``paused_operator`` +
   explicit-resume-required) with a second compare-and-swap, append ``run_rewound``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from gitrefs.errors import GitRefsError
from iterion.engine.versioning import open_versioning
from iterion.engine.workspace_guard import hold_for_restore, release_workspace
from iterion.rewind.auto import AutoSelection, select_pivot
from iterion.rewind.auto_detect import DetectedEdit, detect_edit
from iterion.rewind.errors import RewindError
from iterion.rewind.files import (GITREFS, NONE_REASON, WORKSPACETRACK, FilesReport, RestoreScope,
                                  check_scope, default_scope, protected_paths, restore_files)
from iterion.rewind.other_runs import other_runs_production
from iterion.rewind.invalidation import in_execution_order, invalidated_nodes, require_node
from iterion.rewind.promotion import promote
from iterion.rewind.sources import load_current_workflow
from iterion.rewind.state_edit import (current_attempt, executed_nodes, park_run, resolve_anchor,
                                       rewind_checkpoint)
from iterion.rewind.undo import save_undo_record
from iterion.rewind.worktree import ensure_worktree
from iterion.store import Command, RunDoc, StaleWriteError, Store, WorkspaceMode, check_command
from iterion.store import events as ev
from workspacetrack.errors import TrackError


@dataclass
class RewindRequest:
    run_id: str
    node: str | None = None
    auto: bool = False
    restore_scope: RestoreScope | None = None  # None: the mechanism's default
    file: Path | None = None  # the workflow source, when not where the run recorded it
    dry_run: bool = False


@dataclass
class AutoReport:
    changes: list[str]  # what the diff detected, one line each
    candidates: list[dict[str, Any]]  # impacted AND executed: {node, reasons}
    ignored: list[dict[str, Any]]  # impacted, never executed

    @classmethod
    def of(cls, changes: list[str], sel: AutoSelection) -> AutoReport:
        return cls(changes=changes,
                   candidates=[{"node": c.node, "reasons": list(c.reasons)} for c in sel.candidates],
                   ignored=[{"node": c.node, "reasons": list(c.reasons)} for c in sel.ignored])


@dataclass
class RewindResult:
    run_id: str
    from_node: str | None  # where the checkpoint stood
    to_node: str  # the pivot (after promotion)
    to_iteration: int  # the pivot's execution undone (its files anchor is pre:<to_node>:<to_iteration>)
    replay_iteration: int  # the iteration the replay of the pivot will carry
    promoted_from: str | None
    dropped_nodes: list[str]
    tombstoned_artifacts: dict[str, list[int]]
    orphaned_child_runs: dict[str, str]
    files: FilesReport
    auto: AutoReport | None = None
    dry_run: bool = False
    status: str = "paused_operator"
    warnings: list[str] = field(default_factory=list)

    def event_payload(self) -> dict[str, Any]:
        f = self.files
        return {
            "from_node": self.from_node, "to_node": self.to_node, "to_iteration": self.to_iteration,
            "replay_iteration": self.replay_iteration,
            "dropped_nodes": self.dropped_nodes, "tombstoned_artifacts": self.tombstoned_artifacts,
            "orphaned_child_runs": sorted(self.orphaned_child_runs.values()),
            "promoted_from": self.promoted_from,
            "files_reverted": f.reverted, "files_ref": f.ref, "files_revert_commit": f.revert_commit,
            "files_backup_ref": f.backup_ref, "files_skip_reason": f.skip_reason,
            "files_overwritten": f.overwritten, "files_left_in_place": f.left_in_place, "files_undo": f.undo,
            "files_left_in_place_details": [asdict(d) for d in f.left_in_place_details],
            "files_restored": f.restored, "files_removed": f.removed,
            "files_skipped": [asdict(s) for s in f.skipped], "files_raw_paths": f.raw_paths,
            "files_mechanism": f.mechanism, "files_scope": f.scope,
            "auto": asdict(self.auto) if self.auto else None,
        }

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["orphaned_child_runs"] = dict(self.orphaned_child_runs)
        return out


OnDetected = Callable[[DetectedEdit], None]


def rewind_run(store: Store, req: RewindRequest, *, on_detected: OnDetected | None = None) -> RewindResult:
    """Rewind ``req.run_id``; ``on_detected`` sees what ``--auto`` detected before anything changes."""
    run_id = store.resolve_run(req.run_id)
    lock = store.lock(run_id)
    ws_lock = None
    if not req.dry_run:
        lock.acquire()  # LockHeldError names the owner: a live engine or a resume owns the run
    try:
        if not req.dry_run and req.restore_scope is not RestoreScope.NONE:
            ws_lock = hold_for_restore(store, run_id)  # refused while another run executes there
        return _rewind_locked(store, run_id, req, on_detected)
    finally:
        release_workspace(ws_lock)
        lock.release()


def _rewind_locked(store: Store, run_id: str, req: RewindRequest,
                   on_detected: OnDetected | None) -> RewindResult:
    doc = store.load_run(run_id)
    check_command(Command.REWIND, run_id, doc.status)
    cp = store.load_checkpoint(run_id)
    if cp is None or not cp.executed:
        raise RewindError(f"run {run_id} has no checkpoint - nothing to rewind",
                          hint="a run that failed before checkpoints were kept cannot be recovered; "
                               "start a new run")
    before_cp, before_doc = cp.model_copy(deep=True), doc.model_copy(deep=True)  # what --undo puts back
    worktree = doc.workspace_mode is WorkspaceMode.WORKTREE
    scope = req.restore_scope or default_scope(worktree)
    check_scope(worktree, scope)

    source = _source_path(doc, req.file)
    wf, unit_files = load_current_workflow(source, doc)
    pre_iterations = _pre_iterations(store, doc, worktree)
    attempt = current_attempt(cp, pre_iterations)
    # "executed" for --auto: completed executions, plus the one the run stopped inside
    executed = executed_nodes(cp) + ([attempt.node] if attempt is not None else [])
    auto_report: AutoReport | None = None
    if req.auto:
        detected = detect_edit(doc, source)
        if on_detected is not None:
            on_detected(detected)  # printed before anything is decided or changed
        selection = select_pivot(wf, detected.impacted, executed)
        auto_report = AutoReport.of(detected.changes, selection)
        asked = selection.pivot
    elif req.node:
        asked = req.node
    else:
        raise RewindError("name the pivot with --node NODE, or let iterion find it with --auto")
    require_node(wf, asked)
    promotion = promote(wf, asked)
    pivot = promotion.pivot
    target = resolve_anchor(cp, pivot, attempt, pre_iterations)
    if target is None:
        ran = ", ".join(dict.fromkeys(executed))
        what = f"{asked} (promoted to its fan-out router {pivot})" if promotion.promoted else asked
        raise RewindError(f"node {what} has not executed in run {run_id}: there is nothing to rewind to",
                          hint=f"executed so far: {ran}")
    dropped_set = invalidated_nodes(wf, pivot)
    dropped = in_execution_order(dropped_set, executed, wf)
    iteration = target.iteration
    anchor = BoundaryLabel(BoundaryKind.PRE, pivot, iteration)
    if scope is not RestoreScope.NONE and pre_iterations is not None \
            and iteration not in pre_iterations.get(pivot, set()):
        # refused before the claim: nothing about the run changes
        raise RewindError(f"the run recorded no workspace boundary {anchor}, so its files cannot be restored",
                          hint="rewind with --restore-scope none to move the checkpoint alone")
    from_node = cp.restart_node

    workspace = Path(doc.workspace_dir) if doc.workspace_dir else None
    expected = doc.version
    if not req.dry_run:
        # The claim: a concurrent resume/cancel that read the document before us now loses its
        # compare-and-swap, and a queued delivery sees the explicit-resume marker already.
        doc.explicit_resume_required = True
        store.save_run(doc, expected)
        if worktree:
            workspace = ensure_worktree(doc)
    files = _files(store, doc, workspace, anchor, scope, unit_files, req.dry_run, worktree)

    artifacts = store.artifacts(run_id)
    docs = [artifacts.read(n, v) for n in artifacts.names() for v in artifacts.versions(n)]
    res = rewind_checkpoint(cp, target, dropped_set, docs, predecessors=set(wf.predecessors(pivot)))
    orphaned = {n: doc.subbot_children[n] for n in dropped if n in doc.subbot_children}
    result = RewindResult(run_id=run_id, from_node=from_node, to_node=pivot, to_iteration=iteration,
                          replay_iteration=res.restart_iteration,
                          promoted_from=promotion.promoted_from, dropped_nodes=dropped,
                          tombstoned_artifacts=res.tombstoned, orphaned_child_runs=orphaned, files=files,
                          auto=auto_report, dry_run=req.dry_run,
                          status=doc.status.value if req.dry_run else "paused_operator")
    if req.dry_run:
        return result
    store.save_checkpoint(run_id, cp)
    park_run(doc, dropped_set)
    try:
        store.save_run(doc, doc.version)
    except StaleWriteError as exc:
        raise RewindError(
            f"run {run_id} was modified concurrently while it was being rewound: {exc.message}",
            hint=("the checkpoint was rewound and workspace restoration may already be applied; inspect "
                  "the workspace and the run before retrying"),
        ) from None
    rewound = store.events(run_id).append(ev.RUN_REWOUND, node=pivot, iteration=iteration,
                                          payload=result.event_payload())
    save_undo_record(store, run_id, before_cp, before_doc, files, rewound.seq, pivot)
    return result


def _pre_iterations(store: Store, doc: RunDoc, worktree: bool) -> dict[str, set[int]] | None:
    """node -> iterations with a recorded ``pre:`` boundary; None when the workspace's record
    cannot be read (a released worktree), so callers fall back to the checkpoint alone."""
    workspace = Path(doc.workspace_dir) if doc.workspace_dir else None
    if workspace is None or not workspace.is_dir():
        return None
    try:
        versioning = open_versioning(worktree=worktree, workspace=workspace, run_dir=store.run_dir(doc.id),
                                     run_id=doc.id, watch=False)
    except (GitRefsError, TrackError):
        return None
    try:
        out: dict[str, set[int]] = {}
        for entry in versioning.chain():
            if entry.label.kind is BoundaryKind.PRE:
                out.setdefault(entry.label.node, set()).add(entry.label.iteration)
        return out
    except (GitRefsError, TrackError):
        return None
    finally:
        versioning.close()


def _source_path(doc: RunDoc, explicit: Path | None) -> Path:
    if explicit is not None:
        path = Path(explicit)
    elif doc.bundle_path:
        path = Path(doc.bundle_path)
    elif doc.file_path:
        path = Path(doc.file_path)
    else:
        raise RewindError(f"run {doc.id} recorded no workflow file", hint="pass the source with --file")
    if not path.exists():
        raise RewindError(f"workflow source {path} does not exist",
                          hint="pass the source's current location with --file")
    return path


def _files(store: Store, doc: RunDoc, workspace: Path | None, anchor: BoundaryLabel, scope: RestoreScope,
           unit_files: list[Path], dry_run: bool, worktree: bool) -> FilesReport:
    if scope is RestoreScope.NONE:
        return FilesReport(mechanism=GITREFS if worktree else WORKSPACETRACK, scope=scope.value,
                           anchor=str(anchor), skip_reason=NONE_REASON)
    if workspace is None or not workspace.is_dir():
        raise RewindError(f"the workspace of run {doc.id} ({workspace}) is missing; "
                          "its files cannot be restored",
                          hint="rewind with --restore-scope none")
    versioning = open_versioning(worktree=worktree, workspace=workspace, run_dir=store.run_dir(doc.id),
                                 run_id=doc.id, watch=False)
    try:
        others = [] if worktree else other_runs_production(store, doc, versioning.backend, anchor)
        return restore_files(versioning, anchor, scope, workspace=workspace,
                             protected=protected_paths(workspace, unit_files), dry_run=dry_run, other_runs=others)
    finally:
        versioning.close()

