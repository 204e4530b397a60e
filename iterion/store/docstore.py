"""The run-document store interface: what any backend of the run store must provide.

Two backends implement it: the embedded filesystem store (``iterion.store.fsdocs.FsRunDocs``,
the default, nothing to start) and the JetStream store (``iterion.store.jetstream``, shared by
servers and runners on several machines). ``iterion.store.store.Store`` is the one facade the
engine, resume, rewind, the HTTP service and the CLI use: it sends run documents, checkpoints,
events and names through its backend and keeps what is local to one machine (the run's working
directory, track data, locks, interactions, the space reserve) under its root.
``tests/storeconf`` runs one conformance suite against both backends, raw and through ``Store``.

The contract every backend keeps:
- ``create_run`` refuses an id that exists (RunExistsError); the new document has version 1 and
  a friendly name unique in the store (a taken name gets ``-2``, ``-3``...).
- ``save_run(doc, expected_version)`` is a compare-and-swap: it writes only if the stored version
  is ``expected_version`` (else StaleWriteError, which the HTTP service maps to 409), and the new
  version is ``expected_version + 1``. Two writers racing on one version: exactly one wins.
- ``load_run`` of an unknown id raises RunNotFoundError.
- Events are append-only and ordered per run; ``seq`` is 1, 2, 3... per run with no gap or
  duplicate, even with appenders in several processes; ``read_events(after_seq=n)`` returns the
  events with seq > n in order. ``last_flush_time`` is when the last event was written (POSIX
  seconds; None without events): the staleness rule (--force-stale) compares against it.
- A checkpoint saved is the one loaded (last writer wins: only the run's owner writes it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the models (pydantic) are not needed to list runs: see iterion/store/summary.py
    from iterion.store.artifacts import ArtifactStore
    from iterion.store.attachments import AttachmentStore
    from iterion.store.checkpoint import Checkpoint
    from iterion.store.events import Event
    from iterion.store.run_doc import RunDoc
    from iterion.store.spend import SpendCounter


@dataclass(frozen=True)
class CorruptRun:
    """A run whose document cannot be read: listed as status ``corrupt``, never hidden.

    ``path``: where it is (its run.json, or ``nats://.../<bucket>/<key>`` on JetStream)."""

    id: str
    path: Path | str
    detail: str
    status: str = "corrupt"


class EventAppender(Protocol):
    """One run's timeline appender (``Store.events(run_id)``; the engine keeps one per run)."""

    def append(self, type: str, *, node: str | None = None, iteration: int | None = None,
               payload: dict[str, Any] | None = None) -> Event: ...


class RunDocumentStore(Protocol):
    shared: bool  # True: several machines share it (local locks prove nothing about other hosts)

    def where(self) -> str: ...

    def create_run(self, doc: RunDoc) -> RunDoc: ...

    def discard_run(self, run_id: str) -> None: ...

    def load_run(self, run_id: str) -> RunDoc: ...

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc: ...

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc: ...

    def list_runs(self) -> list[RunDoc]: ...

    def list_entries(self) -> list[RunDoc | CorruptRun]: ...

    def exists(self, run_id: str) -> bool: ...

    def run_names(self) -> set[str]: ...

    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None: ...

    def load_checkpoint(self, run_id: str) -> Checkpoint | None: ...

    def has_checkpoint(self, run_id: str) -> bool: ...

    def checkpoint_location(self, run_id: str) -> str: ...

    def events(self, run_id: str) -> EventAppender: ...

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event: ...

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]: ...

    def last_flush_time(self, run_id: str) -> float | None: ...

    def artifacts(self, run_id: str, run_dir: Path) -> ArtifactStore: ...

    def attachments(self, run_id: str, run_dir: Path) -> AttachmentStore: ...

    def spend_counter(self) -> SpendCounter:
        """The store-wide daily spend counter kept beside these documents (iterion/store/spend.py)."""
        ...

    def close(self) -> None: ...
