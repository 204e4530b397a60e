"""``iterion rewind --undo``: put back what the last rewind of a run changed.

A real rewind records, in its intent record (iterion/rewind/intent.py, step 1), the checkpoint
and the run-document fields as they were before it (``undo_before``). When the rewind is
complete (its ``run_rewound`` event appended, also when a later command finished an
interrupted one) it writes ``runs/<run>/rewind-undo.json`` (``UndoRecord``): those fields, and
the files bank the restore took (the disk as it stood before it wrote anything).
``undo_rewind`` puts the bank's content of every path that restore changed back
(``Versioning.undo``: in place, the tracker's undo; worktree, git's undo of the revert, which
also moves HEAD back off the revert commit), the checkpoint and the document fields back, appends ``run_rewind_undone`` and removes
the record, so a second undo is refused.

It refuses (exit 2, one line) when the run moved on since: any event after the rewind's own (a
resume, a new boundary, a cancel all append one), or a checkpoint rewritten since, or a rewind
of it left interrupted (finish that first).

Crash safety, the rewind's design (intent first): before its first change, the undo marks the
record ``undoing`` (durable, atomic). A record so marked is an undo that was committed and may
be half done; the next ``rewind --undo`` finishes it without the "moved on" check on the
checkpoint (its own step may have rewritten it) but still refuses if any other event was
appended since. Every step is idempotent: the files come back from the same bank (a path
already back is not written again), the checkpoint and document are overwritten with the same
content, the event is appended once (found by the record's ``undo_id``), and the record is
removed last. Kill points: ``undo-intent``, ``undo-files``, ``undo-checkpoint``, ``undo-event``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from gitrefs.persist import UserError, VersionedModel, read_model, write_model
from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.killpoint import kill_point
from iterion.engine.versioning import open_versioning, worktree_of
from iterion.engine.versioning_types import UndoBank
from iterion.engine.workspace_guard import hold_for_restore, release_workspace
from iterion.rewind.errors import RewindError
from iterion.rewind.files import FilesReport
from iterion.store import Checkpoint, RunDoc, RunStatus, Store, WorkspaceMode

UNDO_FILE = "rewind-undo.json"
RUN_REWIND_UNDONE = "run_rewind_undone"


class UndoRecord(VersionedModel):
    run_id: str
    rewound_seq: int  # the seq of the rewind's run_rewound event
    checkpoint_written_at: datetime | None  # the rewound checkpoint's stamp: a newer one = moved on
    checkpoint: dict[str, Any]  # the checkpoint before the rewind (Checkpoint, as JSON)
    status: RunStatus
    failure_code: str | None = None
    error: str | None = None
    finished_at: datetime | None = None
    explicit_resume_required: bool = False
    subbot_children: dict[str, str] = Field(default_factory=dict)
    mechanism: str
    bank: str | None = None  # the files bank the restore took (None: no file was changed)
    touched: list[str] = Field(default_factory=list)  # the paths the restore wrote or removed
    to_node: str = ""
    anchor: str = ""  # the boundary restored to (pre:<node>:<iteration>)
    revert_commit: str | None = None  # worktree runs: the revert commit the rewind made
    rewind_id: str | None = None  # the rewind intent's id this record undoes
    undoing: bool = False  # set (durably) before the undo's first change: a committed undo


def _path(store: Store, run_id: str) -> Path:
    return store.run_dir(run_id) / UNDO_FILE


def undo_before(cp: Checkpoint, doc: RunDoc) -> dict[str, Any]:
    """What ``--undo`` puts back of the run as it is now (JSON: kept in the rewind's intent)."""
    return {"checkpoint": cp.model_dump(mode="json"), "status": doc.status.value,
            "failure_code": doc.failure_code, "error": doc.error,
            "finished_at": doc.finished_at.isoformat() if doc.finished_at else None,
            "explicit_resume_required": doc.explicit_resume_required,
            "subbot_children": dict(doc.subbot_children)}


def save_undo_record(store: Store, run_id: str, before: dict[str, Any], files: FilesReport,
                     rewound_seq: int, to_node: str, rewind_id: str | None = None) -> None:
    """Bank what ``--undo`` needs (called once the rewind is complete and its event appended;
    idempotent: a finished interrupted rewind writes the same record)."""
    after = store.load_checkpoint(run_id)
    touched = sorted(set(files.restored) | set(files.removed))
    write_model(_path(store, run_id), UndoRecord(
        run_id=run_id, rewound_seq=rewound_seq, checkpoint_written_at=after.written_at if after else None,
        **before, mechanism=files.mechanism,
        bank=files.backup_ref if files.reverted else None, touched=touched if files.reverted else [],
        to_node=to_node, anchor=files.anchor, revert_commit=files.revert_commit, rewind_id=rewind_id))


def undo_command(run_ref: str, *where: str) -> str:
    """The command that undoes the last rewind, spelled as the program was invoked."""
    from iterion.invocation import command

    return command("rewind", "--undo", "--run-id", run_ref, *where)


@dataclass
class UndoResult:
    run_id: str
    status: str
    to_node: str
    restored_checkpoint_node: str | None
    files_restored: list[str] = field(default_factory=list)
    files_removed: list[str] = field(default_factory=list)
    files_skipped: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def undo_rewind(store: Store, run_ref: str) -> UndoResult:
    run_id = store.resolve_run(run_ref)
    _check_not_moved_on(store, run_id, _load(store, run_id))  # refused before the lock is even taken
    lock = store.lock(run_id)
    lock.acquire()  # LockHeldError names the owner: a live engine or a resume owns the run
    ws_lock = None
    try:
        rec = _load(store, run_id)  # again under the lock: a resume may have slipped in meanwhile
        _check_not_moved_on(store, run_id, rec)
        if rec.bank is not None:
            ws_lock = hold_for_restore(store, run_id)
        if not rec.undoing:
            rec.undoing = True
            write_model(_path(store, run_id), rec)  # THE COMMIT POINT: before the first change
            completing = False
        else:
            completing = True  # a killed undo committed this one: finish it
        kill_point("undo-intent")
        return _undo_locked(store, run_id, rec, completing=completing)
    finally:
        release_workspace(ws_lock)
        lock.release()


def undoable(store: Store, run_id: str) -> UndoRecord | None:
    """The last rewind's record when ``undo_rewind`` would accept it now, reading only (None:
    no rewind to undo, or the run moved on since): what the web page offers to undo."""
    try:
        rec = _load(store, run_id)
        _check_not_moved_on(store, run_id, rec)
    except (RewindError, ValueError, OSError):
        return None
    return rec


def _load(store: Store, run_id: str) -> UndoRecord:
    try:
        return read_model(_path(store, run_id), UndoRecord)
    except FileNotFoundError:
        raise RewindError(f"run {run_id} has no rewind to undo (none was made, or it was undone already)",
                          hint="`iterion inspect --run-id RUN --events` shows its rewinds",
                          exit_code=ErrorKind.BAD_INPUT) from None


def _check_not_moved_on(store: Store, run_id: str, rec: UndoRecord) -> None:
    from iterion.rewind.intent import has_intent

    if has_intent(store, run_id):
        raise RewindError(f"run {run_id} has an interrupted rewind: finish it before undoing anything",
                          hint=f"finish it with `iterion rewind --run-id {run_id}`", exit_code=ErrorKind.BAD_INPUT)
    later = [e for e in store.read_events(run_id, after_seq=rec.rewound_seq)
             if not (rec.undoing and e.type == RUN_REWIND_UNDONE)]
    cp = store.load_checkpoint(run_id)
    # a committed undo may have rewritten the checkpoint itself: only other events count then
    rewritten = not rec.undoing and (cp is None or cp.written_at != rec.checkpoint_written_at)
    if later or rewritten:
        what = f"{later[0].type} at event {later[0].seq}" if later else "its checkpoint was rewritten"
        raise RewindError(f"run {run_id} moved on since its last rewind ({what}): that rewind can no longer "
                          "be undone", hint="rewind again with --node or --auto to go where you want", exit_code=ErrorKind.BAD_INPUT)


def _undo_locked(store: Store, run_id: str, rec: UndoRecord, *, completing: bool = False) -> UndoResult:
    doc = store.load_run(run_id)
    result = UndoResult(run_id=run_id, status=rec.status.value, to_node=rec.to_node,
                        restored_checkpoint_node=rec.checkpoint.get("restart_node"))
    if rec.bank is not None:
        workspace = Path(doc.workspace_dir or "")
        if not workspace.is_dir():
            raise RewindError(f"the workspace of run {run_id} ({workspace}) is missing; its files cannot be put back",
                              exit_code=ErrorKind.BAD_INPUT)
        worktree = worktree_of(rec.mechanism) or doc.workspace_mode is WorkspaceMode.WORKTREE
        versioning = open_versioning(worktree=worktree, workspace=workspace, run_dir=store.run_dir(run_id),
                                     run_id=run_id, watch=False)
        bank = UndoBank(bank=rec.bank, anchor=rec.anchor, touched=tuple(rec.touched),
                        revert_commit=rec.revert_commit)
        try:
            out = versioning.undo(bank, completing=completing)
        except UserError as exc:
            if isinstance(exc, RewindError):
                raise
            raise RewindError(f"run {run_id}: {exc.message}", exit_code=ErrorKind.BAD_INPUT) from None
        finally:
            versioning.close()
        result.files_restored, result.files_removed, result.files_skipped = out.restored, out.removed, out.skipped
    kill_point("undo-files")
    store.save_checkpoint(run_id, Checkpoint.model_validate(rec.checkpoint))
    kill_point("undo-checkpoint")

    def back(d: RunDoc) -> None:
        d.status = rec.status
        d.failure_code, d.error, d.finished_at = rec.failure_code, rec.error, rec.finished_at
        d.explicit_resume_required = rec.explicit_resume_required
        d.subbot_children = dict(rec.subbot_children)

    store.update_run(run_id, back)
    if not any(e.type == RUN_REWIND_UNDONE for e in store.read_events(run_id, after_seq=rec.rewound_seq)):
        store.events(run_id).append(RUN_REWIND_UNDONE, node=rec.to_node, payload={
            "bank": rec.bank, "restored": result.files_restored, "removed": result.files_removed,
            "status": rec.status.value})
    kill_point("undo-event")
    _path(store, run_id).unlink(missing_ok=True)  # last: an undo cut short can be run again
    return result


__all__ = ["RUN_REWIND_UNDONE", "UndoRecord", "UndoResult", "save_undo_record", "undo_before", "undo_command", "undo_rewind"]
