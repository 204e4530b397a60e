"""The run-document store interface: what any backend of the run store must provide.

Two backends implement it: the embedded filesystem store (``iterion.store.store.Store``, the
default, nothing to start) and the JetStream store (``iterion.store.jetstream``, shared by servers
and runners on several machines). ``tests/storeconf`` runs one conformance suite against both.

The contract every backend keeps:
- ``create_run`` refuses an id that exists (RunExistsError); the new document has version 1.
- ``save_run(doc, expected_version)`` is a compare-and-swap: it writes only if the stored version
  is ``expected_version`` (else StaleWriteError, which the HTTP service maps to 409), and the new
  version is ``expected_version + 1``. Two writers racing on one version: exactly one wins.
- ``load_run`` of an unknown id raises RunNotFoundError.
- Events are append-only and ordered per run; ``seq`` is 1, 2, 3... per run with no gap or
  duplicate, even with appenders in several processes; ``read_events(after_seq=n)`` returns the
  events with seq > n in order.
- A checkpoint saved is the one loaded (last writer wins: only the run's owner writes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from iterion.store.checkpoint import Checkpoint
from iterion.store.events import Event
from iterion.store.run_doc import RunDoc


class RunDocumentStore(Protocol):
    def create_run(self, doc: RunDoc) -> RunDoc: ...

    def load_run(self, run_id: str) -> RunDoc: ...

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc: ...

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc: ...

    def list_runs(self) -> list[RunDoc]: ...

    def exists(self, run_id: str) -> bool: ...

    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None: ...

    def load_checkpoint(self, run_id: str) -> Checkpoint | None: ...

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event: ...

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]: ...
