"""The lease fence: a run store whose every write is refused once the runner lost the run's lease.

Another runner took the run after our lease expired (``iterion.queue.lease``): from then on the
stale execution must write nothing, so it stops at its next write (a node boundary at the latest)
and never overwrites the new owner's state. The fence is a type, not a list of names: each class
here implements the whole protocol it wraps (``Store``, the document backend ``RunDocumentStore``,
the event appender and the per-run sub-stores it hands out: artifacts, interactions,
attachments), a read passes through, a write checks the lease first. Each class names its reads
in ``READS``; ``tests/queue/test_fence.py`` enumerates every public method of each protocol,
requires the fenced class to define it itself (an inherited method would be an unfenced door)
and calls every method not in ``READS`` after a real lease expiry, asserting it is refused and
nothing was written. A write method added to a store later fails that test until it is fenced.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrefs.persist.errors import ErrorKind
from iterion.store.artifacts import ArtifactDoc, ArtifactStore
from iterion.store.attachments import AttachmentRecord, AttachmentStore
from iterion.store.docstore import CorruptRun, EventAppender, RunDocumentStore
from iterion.store.errors import StoreError
from iterion.store.interactions import InteractionDoc, InteractionStore
from iterion.store.layout import RunPaths
from iterion.store.store import STALE_AFTER_S, Store

if TYPE_CHECKING:
    from iterion.queue.lease import Lease
    from iterion.store.checkpoint import Checkpoint, InteractionKind
    from iterion.store.events import Event
    from iterion.store.lock import RunLock
    from iterion.store.run_doc import RunDoc
    from iterion.store.runindex import IndexRow, Page
    from iterion.store.spend import SpendCounter
    from iterion.store.summary import RunSummary


class LeaseLostError(StoreError):
    """A write refused because this runner no longer holds the run's lease."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"run {run_id}: this runner lost its lease ({reason}); nothing more is written",
                         kind=ErrorKind.REFUSED)


def check(lease: Lease) -> None:
    """Raise LeaseLostError once ``lease`` is lost: every write of this module calls it first."""
    if lease.lost.is_set():
        raise LeaseLostError(lease.run_id, lease.lost_reason)


class FencedAppender(EventAppender):
    """An ``EventAppender`` whose appends are refused once the lease is lost."""

    READS: frozenset[str] = frozenset()

    def __init__(self, appender: EventAppender, lease: Lease) -> None:
        self._appender, self._lease = appender, lease

    def append(self, type: str, *, node: str | None = None, iteration: int | None = None,
               payload: dict[str, Any] | None = None) -> Event:
        check(self._lease)
        return self._appender.append(type, node=node, iteration=iteration, payload=payload)


class FencedArtifacts(ArtifactStore):
    READS = frozenset({"versions", "names", "read", "latest"})

    def __init__(self, inner: ArtifactStore, lease: Lease) -> None:  # no super().__init__: all is delegated
        self.root = inner.root
        self._inner, self._lease = inner, lease

    def versions(self, name: str) -> list[int]:
        return self._inner.versions(name)

    def names(self) -> list[str]:
        return self._inner.names()

    def read(self, name: str, version: int) -> ArtifactDoc:
        return self._inner.read(name, version)

    def latest(self, name: str, *, exclude: Collection[int] = ()) -> ArtifactDoc | None:
        return self._inner.latest(name, exclude=exclude)

    def publish(self, name: str, value: Any, *, node: str | None = None, iteration: int | None = None) -> ArtifactDoc:
        check(self._lease)
        return self._inner.publish(name, value, node=node, iteration=iteration)


class FencedAttachments(AttachmentStore):
    READS = frozenset({"get", "list"})

    def __init__(self, inner: AttachmentStore, lease: Lease) -> None:
        self.root = inner.root
        self._inner, self._lease = inner, lease

    def get(self, name: str) -> AttachmentRecord | None:
        return self._inner.get(name)

    def list(self) -> list[AttachmentRecord]:
        return self._inner.list()

    def stage(self, name: str, source: Path, *, mime: str | None = None) -> AttachmentRecord:
        check(self._lease)
        return self._inner.stage(name, source, mime=mime)


class FencedInteractions(InteractionStore):
    READS = frozenset({"load", "list"})

    def __init__(self, inner: InteractionStore, lease: Lease) -> None:
        self.root = inner.root
        self._inner, self._lease = inner, lease

    def load(self, interaction_id: str) -> InteractionDoc:
        return self._inner.load(interaction_id)

    def list(self) -> list[InteractionDoc]:
        return self._inner.list()

    def ask(self, node: str, questions: dict[str, Any], *, iteration: int = 0, kind: InteractionKind = "human",
            interaction_id: str | None = None) -> InteractionDoc:
        check(self._lease)
        return self._inner.ask(node, questions, iteration=iteration, kind=kind, interaction_id=interaction_id)

    def answer(self, interaction_id: str, answers: dict[str, Any]) -> InteractionDoc:
        check(self._lease)
        return self._inner.answer(interaction_id, answers)


class FencedDocs(RunDocumentStore):
    """The document backend behind a FencedStore (what ``store.docs`` is on it)."""

    READS = frozenset({"where", "load_run", "list_runs", "list_entries", "exists", "run_names", "load_checkpoint",
                       "has_checkpoint", "checkpoint_location", "read_events", "last_flush_time", "close",
                       # the store-wide spend counter: charges record money already spent, whoever
                       # spent it, so a fenced runner's last call still counts (not the run's state)
                       "spend_counter"})
    SUBSTORES = frozenset({"events", "artifacts", "attachments"})

    def __init__(self, inner: RunDocumentStore, lease: Lease) -> None:
        self.shared = inner.shared
        self._inner, self._lease = inner, lease

    def where(self) -> str:
        return self._inner.where()

    def create_run(self, doc: RunDoc) -> RunDoc:
        check(self._lease)
        return self._inner.create_run(doc)

    def discard_run(self, run_id: str) -> None:
        check(self._lease)
        self._inner.discard_run(run_id)

    def load_run(self, run_id: str) -> RunDoc:
        return self._inner.load_run(run_id)

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc:
        check(self._lease)
        return self._inner.save_run(doc, expected_version)

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        check(self._lease)
        return self._inner.update_run(run_id, mutate, attempts=attempts)

    def list_runs(self) -> list[RunDoc]:
        return self._inner.list_runs()

    def list_entries(self) -> list[RunDoc | CorruptRun]:
        return self._inner.list_entries()

    def exists(self, run_id: str) -> bool:
        return self._inner.exists(run_id)

    def run_names(self) -> set[str]:
        return self._inner.run_names()

    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None:
        check(self._lease)
        self._inner.save_checkpoint(run_id, checkpoint)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self._inner.load_checkpoint(run_id)

    def has_checkpoint(self, run_id: str) -> bool:
        return self._inner.has_checkpoint(run_id)

    def checkpoint_location(self, run_id: str) -> str:
        return self._inner.checkpoint_location(run_id)

    def events(self, run_id: str) -> EventAppender:
        return FencedAppender(self._inner.events(run_id), self._lease)

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        check(self._lease)
        return self._inner.append_event(run_id, type, node=node, iteration=iteration, payload=payload)

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        return self._inner.read_events(run_id, after_seq=after_seq)

    def last_flush_time(self, run_id: str) -> float | None:
        return self._inner.last_flush_time(run_id)

    def artifacts(self, run_id: str, run_dir: Path) -> ArtifactStore:
        return FencedArtifacts(self._inner.artifacts(run_id, run_dir), self._lease)

    def attachments(self, run_id: str, run_dir: Path) -> AttachmentStore:
        return FencedAttachments(self._inner.attachments(run_id, run_dir), self._lease)

    def spend_counter(self) -> SpendCounter:
        return self._inner.spend_counter()

    def close(self) -> None:
        self._inner.close()


class FencedStore(Store):
    """``store`` with every write refused once ``lease`` is lost (see the module doc).

    Every method of Store is defined here: a read goes to the wrapped store (so its own fast
    paths for its backend apply), a write checks the lease first; a sub-store it hands out
    (``artifacts``, ``interactions``, ``attachments``, ``events``) is fenced the same way."""

    READS = frozenset({"where", "close", "run_dir", "paths", "track_dir", "exists", "run_names", "load_run",
                       "list_runs", "list_entries", "list_summaries", "index_rows", "run_page", "corrupt_runs",
                       "resolve_run", "short_id", "load_checkpoint", "has_checkpoint", "checkpoint_location",
                       "read_events", "last_flush_time", "check_stale", "is_locked", "shared"})
    # hand out a fenced sub-store: the writes are its methods (fenced there)
    SUBSTORES = frozenset({"events", "artifacts", "interactions", "attachments"})

    def __init__(self, store: Store, lease: Lease) -> None:  # no super().__init__: the state is the wrapped one's
        self._store, self._lease = store, lease
        self.root, self.origin, self.runs_dir = store.root, store.origin, store.runs_dir
        self.docs = FencedDocs(store.docs, lease)

    @property
    def shared(self) -> bool:
        return self._store.shared

    def where(self) -> str:
        return self._store.where()

    def close(self) -> None:
        self._store.close()

    def run_dir(self, run_id: str) -> Path:
        return self._store.run_dir(run_id)

    def paths(self, run_id: str) -> RunPaths:
        return self._store.paths(run_id)

    def track_dir(self, run_id: str) -> Path:
        return self._store.track_dir(run_id)

    def exists(self, run_id: str) -> bool:
        return self._store.exists(run_id)

    def create_run(self, doc: RunDoc) -> RunDoc:
        check(self._lease)
        return self._store.create_run(doc)

    def run_names(self) -> set[str]:
        return self._store.run_names()

    def discard_new_run(self, run_id: str) -> None:
        check(self._lease)
        self._store.discard_new_run(run_id)

    def ensure_reserve(self, run_id: str) -> None:
        check(self._lease)
        self._store.ensure_reserve(run_id)

    def release_reserve(self, run_id: str) -> bool:
        check(self._lease)
        return self._store.release_reserve(run_id)

    def load_run(self, run_id: str) -> RunDoc:
        return self._store.load_run(run_id)

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc:
        check(self._lease)
        return self._store.save_run(doc, expected_version)

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        check(self._lease)
        return self._store.update_run(run_id, mutate, attempts=attempts)

    def list_runs(self) -> list[RunDoc]:
        return self._store.list_runs()

    def list_entries(self) -> list[RunDoc | CorruptRun]:
        return self._store.list_entries()

    def list_summaries(self) -> list[RunSummary | CorruptRun]:
        return self._store.list_summaries()

    def index_rows(self) -> list[IndexRow]:
        return self._store.index_rows()

    def run_page(self, *, status: set[str] | None = None, workflow: str | None = None, since: datetime | None = None,
                 after: str | None = None, limit: int | None = None, rows: list[IndexRow] | None = None) -> Page:
        return self._store.run_page(status=status, workflow=workflow, since=since, after=after, limit=limit,
                                    rows=rows)

    def corrupt_runs(self) -> list[CorruptRun]:
        return self._store.corrupt_runs()

    def resolve_run(self, ref: str) -> str:
        return self._store.resolve_run(ref)

    def short_id(self, run_id: str) -> str:
        return self._store.short_id(run_id)

    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None:
        check(self._lease)
        self._store.save_checkpoint(run_id, checkpoint)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self._store.load_checkpoint(run_id)

    def has_checkpoint(self, run_id: str) -> bool:
        return self._store.has_checkpoint(run_id)

    def checkpoint_location(self, run_id: str) -> str:
        return self._store.checkpoint_location(run_id)

    def events(self, run_id: str) -> EventAppender:
        # the engine keeps the appender for the whole run: the appender itself is fenced
        return FencedAppender(self._store.events(run_id), self._lease)

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        check(self._lease)
        return self._store.append_event(run_id, type, node=node, iteration=iteration, payload=payload)

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        return self._store.read_events(run_id, after_seq=after_seq)

    def last_flush_time(self, run_id: str) -> float | None:
        return self._store.last_flush_time(run_id)

    def check_stale(self, run_id: str, *, now: float | None = None, threshold_s: float = STALE_AFTER_S,
                    own_lock: RunLock | None = None) -> None:
        self._store.check_stale(run_id, now=now, threshold_s=threshold_s, own_lock=own_lock)

    def lock(self, run_id: str) -> RunLock:
        check(self._lease)  # taking the run's execution lock writes its owner file
        return self._store.lock(run_id)

    def is_locked(self, run_id: str) -> bool:
        return self._store.is_locked(run_id)

    def artifacts(self, run_id: str) -> ArtifactStore:
        return FencedArtifacts(self._store.artifacts(run_id), self._lease)

    def interactions(self, run_id: str) -> InteractionStore:
        return FencedInteractions(self._store.interactions(run_id), self._lease)

    def attachments(self, run_id: str) -> AttachmentStore:
        return FencedAttachments(self._store.attachments(run_id), self._lease)
