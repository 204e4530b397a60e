"""The run store: run documents, checkpoints, events, artifacts, interactions, attachments, locks.

Layout (where the store is: ``iterion.store.layout.locate_store``; by default
``.git/iterion/store`` in a git repository). With the JetStream backend (``--nats``:
``iterion.store.opener``) run.json, checkpoint.json, events.jsonl, artifacts/ and attachments
records live in JetStream instead and the rest stays here (``iterion.store.docstore``)::

    runs/<run>/run.json          RunDoc (CAS on ``version``)
    runs/<run>/checkpoint.json   Checkpoint (the authoritative execution state)
    runs/<run>/events.jsonl      the timeline (append-only)
    runs/<run>/lock              the execution lock (flock)
    runs/<run>/rewind-intent.json  an unfinished rewind (iterion/rewind/intent.py)
    runs/<run>/.space-reserve    preallocated room to record the run's end on a full disk (reserve.py)
    runs/<run>/events.jsonl.corrupt-<time>   unreadable timeline lines moved aside, byte for byte
    runs/<run>/artifacts/<name>/<version>.json
    runs/<run>/interactions/<id>.json
    runs/<run>/attachments/
    runs/<run>/track/            workspacetrack data of an in-place run
    workspaces/<hash>.lock       the workspace lock of an in-place workspace (workspace_lock.py)
    worktrees/<run>/             the git worktree of a `worktree: auto` run

Names are imported on first use (PEP 562, as ``gitrefs.persist`` does): ``from iterion.store import Store``
does not import the document models (pydantic), which the run list does not need (issue 14,
point 10). ``tests/cli/test_startup.py`` pins which commands stay clear of pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitrefs.persist.lazyexports import lazy_exports

if TYPE_CHECKING:
    from iterion.store.artifacts import ArtifactDoc, ArtifactNotFoundError, ArtifactStore
    from iterion.store.attachments import AttachmentRecord, AttachmentStore
    from iterion.store.checkpoint import AnchorReason, Checkpoint, ExecutedNode, PendingInteraction
    from iterion.store.errors import (
        CorruptDocumentError,
        InvalidTransitionError,
        LockHeldError,
        RunExistsError,
        RunNotFoundError,
        StaleWriteError,
        StatusRefusedError,
        StoreError,
    )
    from iterion.store.events import Event, EventLog, last_flush_time, read_events
    from iterion.store.ids import friendly_name, new_id
    from iterion.store.interactions import InteractionDoc, InteractionStore
    from iterion.store.layout import RunPaths, resolve_store_dir
    from iterion.store.lock import RunLock, is_held, read_owner
    from iterion.store.run_doc import OwnerInfo, RunDoc, WorkspaceMode, WorktreeInfo
    from iterion.store.status import (
        Command,
        RunStatus,
        accepts,
        check_command,
        check_transition,
        refusal_message,
    )
    from iterion.store.store import Store

_HOME = {
    **dict.fromkeys(("ArtifactDoc", "ArtifactNotFoundError", "ArtifactStore"), "iterion.store.artifacts"),
    **dict.fromkeys(("AttachmentRecord", "AttachmentStore"), "iterion.store.attachments"),
    **dict.fromkeys(("AnchorReason", "Checkpoint", "ExecutedNode", "PendingInteraction"), "iterion.store.checkpoint"),
    **dict.fromkeys(("CorruptDocumentError", "InvalidTransitionError", "LockHeldError", "RunExistsError",
                     "RunNotFoundError", "StaleWriteError", "StatusRefusedError", "StoreError"), "iterion.store.errors"),
    **dict.fromkeys(("Event", "EventLog", "last_flush_time", "read_events"), "iterion.store.events"),
    **dict.fromkeys(("friendly_name", "new_id"), "iterion.store.ids"),
    **dict.fromkeys(("InteractionDoc", "InteractionStore"), "iterion.store.interactions"),
    **dict.fromkeys(("RunPaths", "resolve_store_dir"), "iterion.store.layout"),
    **dict.fromkeys(("RunLock", "is_held", "read_owner"), "iterion.store.lock"),
    **dict.fromkeys(("OwnerInfo", "RunDoc", "WorkspaceMode", "WorktreeInfo"), "iterion.store.run_doc"),
    **dict.fromkeys(("Command", "RunStatus", "accepts", "check_command", "check_transition", "refusal_message"),
                    "iterion.store.status"),
    "Store": "iterion.store.store",
}

__all__ = [
    "AnchorReason", "ArtifactDoc", "ArtifactNotFoundError", "ArtifactStore", "AttachmentRecord", "AttachmentStore",
    "Checkpoint", "Command", "CorruptDocumentError", "Event", "EventLog", "ExecutedNode", "InteractionDoc",
    "InteractionStore", "InvalidTransitionError", "LockHeldError", "OwnerInfo", "PendingInteraction", "RunDoc",
    "RunExistsError", "RunLock", "RunNotFoundError", "RunPaths", "RunStatus", "StaleWriteError",
    "StatusRefusedError", "Store", "StoreError", "WorkspaceMode", "WorktreeInfo", "accepts", "check_command",
    "check_transition", "friendly_name", "is_held", "last_flush_time", "new_id", "read_events", "read_owner",
    "refusal_message", "resolve_store_dir",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
