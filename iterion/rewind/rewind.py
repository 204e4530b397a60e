"""``iterion rewind``: move a parked run's checkpoint back onto a node it already executed.

Check first, then change. ``_decide`` checks and decides everything while only reading: the
per-run status table, a checkpoint with something executed, the pivot (``--node`` or
``--auto``, promoted out of any fan-out body; invalidated nodes computed against the workflow
source as it is NOW - no hash check: you rewind precisely because you edited it), the event log,
the run directory, the workspace, and every object the restore may read. It runs once before
the per-run lock is taken (so a refusal writes nothing at all) and again under it.

``_commit`` then claims the run (a compare-and-swap on its document: a concurrent writer loses
the race instead of being rewound out from under itself), plans and banks the restore, records
the intent (THE commit point), restores the files, writes the rewound checkpoint, parks the run
(``paused_operator`` + explicit-resume-required) and appends ``run_rewound``. What holds after a
SIGKILL between any two of those steps, and how the next ``iterion rewind`` finishes a killed
one, is written in iterion/rewind/intent.py.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.killpoint import kill_point
from iterion.engine.preflight import UNCHANGED, check_event_log, check_run_dir, check_workspace
from iterion.engine.versioning import Versioning, mechanism_of, worktree_of
from iterion.engine.workspace_guard import hold_for_restore, release_workspace
from iterion.rewind.auto import AutoSelection, select_pivot
from iterion.rewind.auto_detect import DetectedEdit, detect_edit
from iterion.rewind.errors import RewindError
from iterion.rewind.files import (
    NONE_REASON,
    FilesReport,
    OnPlanned,
    RestoreScope,
    check_scope,
    default_scope,
    protected_paths,
    restore_files,
)
from iterion.rewind.files_plan import FilesPlan
from iterion.rewind.intent import RewindIntent, clear_intent, has_intent, load_intent, write_intent
from iterion.rewind.invalidation import in_execution_order, invalidated_nodes, require_node
from iterion.rewind.lent import LentVersioning, versioning_for
from iterion.rewind.offer import pre_iterations as load_pre_iterations
from iterion.rewind.offer import pre_recorded
from iterion.rewind.other_runs import other_runs_production
from iterion.rewind.promotion import promote
from iterion.rewind.sources import load_current_workflow
from iterion.rewind.state_edit import (
    current_attempt,
    executed_nodes,
    park_run,
    resolve_anchor,
    rewind_checkpoint,
)
from iterion.rewind.undo import save_undo_record, undo_before
from iterion.rewind.worktree import check_worktree, ensure_worktree
from iterion.store import Checkpoint, Command, RunDoc, StaleWriteError, Store, WorkspaceMode, check_command
from iterion.store import events as ev


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
    completed_interrupted: bool = False  # this finished a rewind a killed process had committed

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


@dataclass
class _Decision:
    """Everything a rewind decided while only reading (step 0 of iterion/rewind/intent.py)."""

    doc: RunDoc
    expected: int  # the document version the claim compares against
    worktree: bool
    scope: RestoreScope
    anchor: BoundaryLabel
    workspace: Path | None
    protected: list[str]
    unit_files: list[Path]
    asked: str
    cp: Checkpoint  # the rewound checkpoint (not yet written)
    dropped_set: frozenset[str]
    result: RewindResult  # files not yet known
    before: dict[str, Any]  # the checkpoint and document fields before the rewind (for --undo)


def rewind_run(store: Store, req: RewindRequest, *, on_detected: OnDetected | None = None) -> RewindResult:
    """Rewind ``req.run_id``; ``on_detected`` sees what ``--auto`` detected before anything changes.

    A run with an interrupted rewind (its intent record exists) has that rewind finished first;
    with no pivot argument, or the same one, that is all; with another pivot, a new rewind follows.
    """
    run_id = store.resolve_run(req.run_id)
    if req.dry_run:
        pending = load_intent(store, run_id)
        if pending is not None:
            return _preview_intent(store, pending)
        return _dry_run(store, run_id, req, on_detected)
    if not has_intent(store, run_id) and not store.is_locked(run_id):
        # check first, before even the lock's owner record is written: a refusal changes nothing
        # (a held lock is reported by acquire, naming its owner)
        _decide(store, run_id, req, on_detected)
        on_detected = None  # printed once
    lock = store.lock(run_id)
    lock.acquire()  # LockHeldError names the owner: a live engine or a resume owns the run
    ws_lock = None
    try:
        if req.restore_scope is not RestoreScope.NONE:
            ws_lock = hold_for_restore(store, run_id)  # refused while another run executes there
        pending = load_intent(store, run_id)
        if pending is not None:
            finished = _finish_interrupted(store, pending)
            if not _asks_another_pivot(req, pending):
                return finished
        # under the lock: the authoritative check (the run may have changed since the first one)
        return _commit(store, _decide(store, run_id, req, on_detected))
    finally:
        release_workspace(ws_lock)
        lock.release()


def _asks_another_pivot(req: RewindRequest, intent: RewindIntent) -> bool:
    return bool(req.node) and req.node not in (intent.asked, intent.pivot)


def _decide(store: Store, run_id: str, req: RewindRequest, on_detected: OnDetected | None, *,
            lent: LentVersioning | None = None) -> _Decision:
    """Check everything the rewind needs and decide it, reading only (a refusal changes nothing).
    A dry run (``req.dry_run``) writes nothing, so it needs the store and the workspace readable,
    not writable: it works on a read-only mount. ``lent``: the dry run's one versioning
    (``iterion.rewind.lent``), used by every step that reads the run's record."""
    doc = store.load_run(run_id)
    check_command(Command.REWIND, run_id, doc.status)
    cp = store.load_checkpoint(run_id)
    # (a checkpoint with nothing completed is no refusal: the run may have stopped inside its first
    # node, whose own debris its rewind removes; a pivot that never started is refused below)
    if cp is None:
        raise RewindError(f"run {run_id} has no checkpoint - nothing to rewind",
                          hint="a run that failed before checkpoints were kept cannot be recovered; "
                               "start a new run")
    if req.dry_run:
        store.read_events(run_id)  # readable is all a plan needs
    else:
        check_event_log(store, run_id)
        check_run_dir(store, run_id)
    before = undo_before(cp, doc)  # what --undo puts back (recorded in the intent, step 1)
    worktree = doc.workspace_mode is WorkspaceMode.WORKTREE
    scope = req.restore_scope or default_scope(worktree)
    check_scope(worktree, scope)

    source = _source_path(doc, req.file)
    wf, unit_files = load_current_workflow(source, doc)
    pre_iterations = load_pre_iterations(store, doc, worktree, lent)
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
        raise RewindError("name the pivot with --node NODE, or let iterion find it with --auto", exit_code=ErrorKind.BAD_INPUT)
    require_node(wf, asked)
    promotion = promote(wf, asked)
    pivot = promotion.pivot
    target = resolve_anchor(cp, pivot, attempt, pre_iterations)
    if target is None:
        ran = ", ".join(dict.fromkeys(executed))
        what = f"{asked} (promoted to its fan-out router {pivot})" if promotion.promoted else asked
        raise RewindError(f"node {what} has not executed in run {run_id}: there is nothing to rewind to",
                          hint=f"executed so far: {ran}" if ran else "no node has executed in this run yet")
    dropped_set = invalidated_nodes(wf, pivot)
    dropped = in_execution_order(dropped_set, executed, wf)
    iteration = target.iteration
    anchor = BoundaryLabel(BoundaryKind.PRE, pivot, iteration)
    if scope is not RestoreScope.NONE and not pre_recorded(pre_iterations, pivot, iteration):
        # refused before the claim: nothing about the run changes
        raise RewindError(f"the run recorded no workspace boundary {anchor}, so its files cannot be restored",
                          hint="rewind with --restore-scope none to move the checkpoint alone")
    workspace = Path(doc.workspace_dir) if doc.workspace_dir else None
    protected: list[str] = []
    if scope is not RestoreScope.NONE:
        workspace = _check_workspace(doc, workspace, worktree, writable=not req.dry_run)
        protected = protected_paths(workspace, unit_files)
        _check_objects(store, doc, workspace, anchor, scope, protected, worktree, dry_run=req.dry_run, lent=lent)

    from_node = cp.restart_node
    artifacts = store.artifacts(run_id)
    docs = [artifacts.read(n, v) for n in artifacts.names() for v in artifacts.versions(n)]
    res = rewind_checkpoint(cp, target, dropped_set, docs, predecessors=set(wf.predecessors(pivot)))
    orphaned = {n: doc.subbot_children[n] for n in dropped if n in doc.subbot_children}
    mechanism = mechanism_of(worktree)
    result = RewindResult(run_id=run_id, from_node=from_node, to_node=pivot, to_iteration=iteration,
                          replay_iteration=res.restart_iteration,
                          promoted_from=promotion.promoted_from, dropped_nodes=dropped,
                          tombstoned_artifacts=res.tombstoned, orphaned_child_runs=orphaned,
                          files=FilesReport(mechanism=mechanism, scope=scope.value, anchor=str(anchor)),
                          auto=auto_report)
    return _Decision(doc=doc, expected=doc.version, worktree=worktree, scope=scope, anchor=anchor,
                     workspace=workspace, protected=protected, unit_files=unit_files, asked=asked, cp=cp,
                     dropped_set=dropped_set, result=result, before=before)


def _check_workspace(doc: RunDoc, workspace: Path | None, worktree: bool, *, writable: bool = True) -> Path:
    if worktree:
        path = check_worktree(doc)  # a worktree iterion released is rebuilt by the commit
        if not path.is_dir():
            return path
    return check_workspace(workspace, doc.id, fix="rewind with --restore-scope none to move the checkpoint "
                                                  "alone, or restore the workspace at that path", writable=writable)


def _check_objects(store: Store, doc: RunDoc, workspace: Path, anchor: BoundaryLabel, scope: RestoreScope,
                   protected: list[str], worktree: bool, *, dry_run: bool = False,
                   lent: LentVersioning | None = None) -> None:
    """Every object the restore may read must be present: refused here, before anything changes."""
    if not workspace.is_dir():
        return  # a released worktree: rebuilt at its base commit, read from git's own objects
    with tempfile.TemporaryDirectory(prefix="iterion-preview-") if dry_run and lent is None \
            else nullcontext(None) as scratch, \
            versioning_for(lent, worktree=worktree, workspace=workspace, run_dir=store.run_dir(doc.id), run_id=doc.id,
                           scratch=Path(scratch) if scratch is not None else None) as versioning:
        require_objects(versioning, doc.id, anchor, scope, protected)


def require_objects(versioning: Versioning, run_id: str, anchor: BoundaryLabel, scope: RestoreScope,
                    protected: list[str]) -> None:
    """The object check of run ``run_id``'s restore to ``anchor`` through ``versioning``: a
    RewindError naming the first missing object, and how many more (nothing when ``anchor``
    was not recorded: the restore itself refuses that, before it changes anything)."""
    if not versioning.has(anchor):
        return
    missing = versioning.missing_objects(anchor, scope, protected)
    where = versioning.objects_home
    if missing:
        path, digest = missing[0].path, missing[0].digest
        more = f" and {len(missing) - 1} more path(s)" if len(missing) > 1 else ""
        obj = f" (object {digest[:16]})" if digest else ""
        raise RewindError(f"cannot rewind run {run_id}: {where} lacks the content of {path}{obj}{more}, which "
                          f"the restore to {anchor} needs; {UNCHANGED}",
                          hint="the store is damaged: restore it from a backup, or rewind with "
                               "--restore-scope none to move the checkpoint alone", exit_code=ErrorKind.BAD_INPUT)


def _dry_run(store: Store, run_id: str, req: RewindRequest, on_detected: OnDetected | None) -> RewindResult:
    # one read-only versioning for the whole plan (iterion/rewind/lent.py): the pivots' check,
    # the object check and the preview read the run's record through the same tracker
    lent = LentVersioning()
    try:
        d = _decide(store, run_id, req, on_detected, lent=lent)
        d.result.files = _files(store, d.doc, d.workspace, d.anchor, d.scope, d.protected, True, d.worktree, lent=lent)
    finally:
        lent.close()
    d.result.dry_run = True
    d.result.status = d.doc.status.value
    return d.result


def _commit(store: Store, d: _Decision) -> RewindResult:
    """Steps 1-8 of iterion/rewind/intent.py."""
    doc, run_id = d.doc, d.doc.id
    workspace = d.workspace
    if d.worktree:
        workspace = ensure_worktree(doc)  # rebuilt if iterion released it (recorded by the claim)
    # The claim: a concurrent resume/cancel that read the document before us now loses its
    # compare-and-swap, and a queued delivery sees the explicit-resume marker already.
    doc.explicit_resume_required = True
    store.save_run(doc, d.expected)
    r = d.result
    intent = RewindIntent(run_id=run_id, asked=None if r.auto else d.asked, auto=r.auto is not None,
                          pivot=r.to_node, iteration=r.to_iteration, anchor=str(d.anchor), scope=d.scope.value,
                          mechanism=r.files.mechanism, workspace=str(workspace) if workspace else None,
                          protected=d.protected, from_node=r.from_node, replay_iteration=r.replay_iteration,
                          promoted_from=r.promoted_from, dropped_nodes=r.dropped_nodes,
                          dropped_set=sorted(d.dropped_set), tombstoned_artifacts=r.tombstoned_artifacts,
                          orphaned_child_runs=r.orphaned_child_runs,
                          auto_report=asdict(r.auto) if r.auto else None,
                          checkpoint=d.cp.model_dump(mode="json"), before=d.before)
    committed = False

    def commit(plan: FilesPlan | None) -> None:
        nonlocal committed
        intent.files = plan
        write_intent(store, intent)  # THE COMMIT POINT: durable before the first file is touched
        committed = True
        kill_point("rewind-intent")

    files = _files(store, doc, workspace, d.anchor, d.scope, d.protected, False, d.worktree, on_planned=commit)
    if not committed:
        commit(None)  # no file to change: the intent still makes steps 5-8 finishable
    return _finish(store, intent, files, doc=doc)


def _finish(store: Store, intent: RewindIntent, files: FilesReport, *, doc: RunDoc | None = None,
            completed: bool = False) -> RewindResult:
    """Steps 5-8 (after the files): each idempotent, a function of the intent record alone."""
    run_id = intent.run_id
    kill_point("rewind-files")
    store.save_checkpoint(run_id, Checkpoint.model_validate(intent.checkpoint))
    kill_point("rewind-checkpoint")
    if doc is None:
        doc = store.load_run(run_id)
    park_run(doc, intent.dropped_set)
    try:
        store.save_run(doc, doc.version)
    except StaleWriteError as exc:
        raise RewindError(
            f"run {run_id} was modified concurrently while it was being rewound: {exc.message}",
            hint=(f"the files and the checkpoint are rewound; finish with `iterion rewind --run-id {run_id}` "
                  "once the other writer is done"),
        ) from None
    kill_point("rewind-parked")
    result = _result_of(intent, files)
    result.completed_interrupted = completed
    rewound = next((e for e in store.read_events(run_id)
                    if e.type == ev.RUN_REWOUND and e.payload.get("rewind_id") == intent.id), None)
    if rewound is None:
        rewound = store.events(run_id).append(ev.RUN_REWOUND, node=intent.pivot, iteration=intent.iteration,
                                              payload={**result.event_payload(), "rewind_id": intent.id,
                                                       "completed_after_interrupt": completed})
    kill_point("rewind-event")
    if intent.before is not None:  # (an intent written before --undo existed has none: no undo)
        save_undo_record(store, run_id, intent.before, files, rewound.seq, intent.pivot, intent.id)
    clear_intent(store, run_id)
    return result


def _result_of(intent: RewindIntent, files: FilesReport) -> RewindResult:
    auto = AutoReport(**intent.auto_report) if intent.auto_report else None
    return RewindResult(run_id=intent.run_id, from_node=intent.from_node, to_node=intent.pivot,
                        to_iteration=intent.iteration, replay_iteration=intent.replay_iteration,
                        promoted_from=intent.promoted_from, dropped_nodes=list(intent.dropped_nodes),
                        tombstoned_artifacts=dict(intent.tombstoned_artifacts),
                        orphaned_child_runs=dict(intent.orphaned_child_runs), files=files, auto=auto)


def _finish_interrupted(store: Store, intent: RewindIntent) -> RewindResult:
    """Run steps 4-8 again from the record of a rewind a killed process committed."""
    doc = store.load_run(intent.run_id)
    worktree = worktree_of(intent.mechanism)
    workspace = Path(intent.workspace) if intent.workspace else None
    scope = RestoreScope(intent.scope)
    if scope is not RestoreScope.NONE:
        check_workspace(workspace, doc.id, fix="restore the workspace at that path, then finish the rewind")
    check_event_log(store, doc.id)
    anchor = BoundaryLabel.parse(intent.anchor)
    files = _files(store, doc, workspace, anchor, scope, list(intent.protected), False, worktree,
                   planned=intent.files)
    return _finish(store, intent, files, completed=True)


def _preview_intent(store: Store, intent: RewindIntent) -> RewindResult:
    """--dry-run on a run with an interrupted rewind: what finishing it would do; nothing changes."""
    doc = store.load_run(intent.run_id)
    report = FilesReport(mechanism=intent.mechanism, scope=intent.scope, anchor=intent.anchor)
    plan = intent.files
    if plan is not None and plan.tracked is not None:
        report.in_scope = sorted(a[0] for a in plan.tracked.actions)
        report.backup_ref = plan.tracked.bank
    elif plan is not None:
        report.in_scope = list(plan.in_scope)
    result = _result_of(intent, report)
    result.dry_run = True
    result.status = doc.status.value
    result.completed_interrupted = True
    result.warnings.append(intent.describe())
    return result


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
           protected: list[str], dry_run: bool, worktree: bool, *, on_planned: OnPlanned | None = None,
           planned: FilesPlan | None = None, lent: LentVersioning | None = None) -> FilesReport:
    if scope is RestoreScope.NONE:
        return FilesReport(mechanism=mechanism_of(worktree), scope=scope.value,
                           anchor=str(anchor), skip_reason=NONE_REASON)
    if workspace is None or not workspace.is_dir():
        raise RewindError(f"the workspace of run {doc.id} ({workspace}) is missing; "
                          "its files cannot be restored",
                          hint="rewind with --restore-scope none")
    with ExitStack() as stack:
        # a dry run writes nothing to the store: what its disk scan stores goes to a scratch dir
        # (the lent versioning, when there is one, was opened so)
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="iterion-preview-"))) \
            if dry_run and lent is None else None
        versioning = stack.enter_context(versioning_for(lent, worktree=worktree, workspace=workspace,
                                                        run_dir=store.run_dir(doc.id), run_id=doc.id, scratch=scratch))
        others = other_runs_production(store, doc, versioning, anchor)
        return restore_files(versioning, anchor, scope, workspace=workspace, protected=protected,
                             dry_run=dry_run, on_planned=on_planned, planned=planned, other_runs=others)
