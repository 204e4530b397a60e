"""The registry of persisted formats: every document iterion writes and reads back later.

One entry per format: the pydantic model that reads it, where it lives, and the directory of
its golden files here (``tests/golden/<name>/v<N>[-<variant>].json``). A golden file is a
document a real run of that version wrote, copied as it was; it is never regenerated. When a
format changes, its model's ``FORMAT_VERSION`` goes up and a new ``v<N>.json`` is added beside
the old ones (``python tests/golden/make_goldens.py`` writes the missing ones from real runs):
``test_golden.py`` then proves the current code still reads every version ever written
(docs/technical/durability.md, "Persisted formats").

Every ``gitrefs.persist.VersionedModel`` subclass of the packages must be listed (``test_golden.py``
fails on one that is not): a document nested in another (a push attempt inside the push log)
is listed too, because it carries its own ``format_version``.

The event line has no version field. Its shape is versioned HERE instead: version 1 is one JSON
object per line with exactly the keys of ``EVENT_LINE_V1`` (``payload`` free-form per event
type); readers ignore keys they do not know. A change to that shape is a new
``EVENT_LINE_VERSION``, a new golden ``event_line/v<N>.jsonl``, and a note in durability.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

GOLDEN = Path(__file__).resolve().parent

EVENT_LINE_VERSION = 1
EVENT_LINE_V1 = ("seq", "time", "type", "node", "iteration", "payload")


@dataclass(frozen=True)
class Format:
    name: str        # the golden directory
    model: str       # "module:Class" of the reader
    where: str       # where a store (or a repository) keeps it
    lines: bool = False  # JSON lines (one document per line) instead of one JSON document

    def cls(self) -> type[BaseModel]:
        module, _, name = self.model.partition(":")
        cls = getattr(importlib.import_module(module), name)
        assert isinstance(cls, type) and issubclass(cls, BaseModel)
        return cls

    def goldens(self) -> list[Path]:
        suffix = ".jsonl" if self.lines else ".json"
        return sorted(p for p in (GOLDEN / self.name).glob(f"v*{suffix}"))


def golden_version(path: Path) -> int:
    """``v3-worktree.json`` -> 3."""
    return int(path.name.split(".")[0].split("-")[0].removeprefix("v"))


FORMATS: tuple[Format, ...] = (
    # the run store (iterion/store, iterion/engine, iterion/rewind)
    Format("run", "iterion.store.run_doc:RunDoc", "<store>/runs/<run>/run.json"),
    Format("checkpoint", "iterion.store.checkpoint:Checkpoint",
           "<store>/runs/<run>/checkpoint.json; turns/<node>/<iteration>.json (fork)"),
    Format("event_line", "iterion.store.events:Event", "<store>/runs/<run>/events.jsonl", lines=True),
    Format("artifact", "iterion.store.artifacts:ArtifactDoc", "<store>/runs/<run>/artifacts/<name>/<version>.json"),
    Format("interaction", "iterion.store.interactions:InteractionDoc", "<store>/runs/<run>/interactions/<id>.json"),
    Format("attachment", "iterion.store.attachments:AttachmentRecord", "<store>/runs/<run>/attachments/<name>.json"),
    Format("control_request", "iterion.engine.control:ControlRequest", "<store>/runs/<run>/control.json"),
    # the run queue (iterion/queue): one message of the work-queue stream
    Format("queue_delivery", "iterion.queue.delivery:Delivery", "JetStream stream <PREFIX>_QUEUE, one message"),
    Format("spend_day", "iterion.store.spend:SpendDay", "<store>/spend/<YYYY-MM-DD>.json (JetStream: KV <prefix>_spend)"),
    Format("rewind_intent", "iterion.rewind.intent:RewindIntent", "<store>/runs/<run>/rewind-intent.json"),
    Format("rewind_undo", "iterion.rewind.undo:UndoRecord", "<store>/runs/<run>/rewind-undo.json"),
    # the claw agent (iterion/backends/claw)
    Format("claw_conversation", "iterion.backends.claw.conversation:Conversation",
           "<store>/runs/<run>/conversations/<session>.json"),
    Format("claw_pending_call", "iterion.backends.claw.conversation:PendingCall",
           "inside claw_conversation (pending)"),
    # the in-place tracker (workspacetrack), under <store>/runs/<run>/track/
    Format("track_state", "workspacetrack.models:RunState", "track/runs/<run>/state.json"),
    Format("track_state_log", "workspacetrack.models:StateLogRecord",
           "track/runs/<run>/state.log (one record per commit after state.json)", lines=True),
    Format("track_snapshot_record", "workspacetrack.models:SnapshotRecord", "inside track_state (snapshots)"),
    Format("track_chain_link", "workspacetrack.models:ChainLink", "inside track_state (chain)"),
    Format("track_manifest", "workspacetrack.models:Manifest", "track/objects/<2 hex>/<62 hex> (a blake3-named object)"),
    Format("track_statcache", "workspacetrack.models:StatCacheDoc", "track/runs/<run>/statcache.json (a cache)"),
    Format("track_blob_cache", "workspacetrack.gitexport:BlobCache",
           "track/gitblobs.json (a cache: content id -> git blob id, written by a checkpoint export)"),
    Format("track_planned_restore", "workspacetrack.restore:PlannedRestore", "inside rewind_intent (files.tracked)"),
    Format("pii_vault", "iterion.builtins.vault:VaultDoc",
           "<store>/runs/<run>/pii_vault.json (mode 0600: privacy_filter's placeholders -> raw values)"),
    # worktree runs (gitrefs), under the repository's git directory
    Format("gitrefs_run", "gitrefs.records:RunRecord", "<git common dir>/iterion/runs/<run>/run.json"),
    Format("gitrefs_push_log", "gitrefs.records:PushLog", "<git common dir>/iterion/runs/<run>/pushes.json"),
    Format("gitrefs_push_attempt", "gitrefs.records:PushAttempt", "inside gitrefs_push_log (attempts)"),
    Format("gitrefs_revert_plan", "gitrefs.records:RevertPlan", "inside rewind_intent (files.revert)"),
    Format("gitrefs_index_state", "gitrefs.private_index:PrivateIndexState",
           "<worktree git dir>/iterion/runs/<run>/index-state.json (a cache)"),
)
