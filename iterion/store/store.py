"""The run store facade: ``Store(root)`` on files, ``Store(root, docs=JetStreamStore(...))`` shared.

Run documents, checkpoints, events and friendly names go through the document backend
(``iterion.store.docstore.RunDocumentStore``): the filesystem one under ``<root>/runs/<run>/`` by
default (``iterion.store.fsdocs``), or JetStream (``iterion.store.jetstream``), where artifacts and
attachments go to its object store too. What belongs to one machine stays under ``root`` with
either backend: the run's directory (track data, the execution lock, interactions, turns, the
rewind intent, control files), the workspace locks and worktrees.

``save_run`` is a compare-and-swap on the run document's ``version`` with either backend: a stale
writer (a cancel racing a resume, a rewind racing a checkpoint) gets StaleWriteError (HTTP 409).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iterion.store.docstore import CorruptRun
from iterion.store.errors import (
    AmbiguousRunRefError,
    RunNotFoundError,
    StatusRefusedError,
    StoreFullError,
)
from iterion.store.fsdocs import RUNS_DIR, FsRunDocs
from iterion.store.ids import check_run_ref, display_ref, validate_run_id
from iterion.store.layout import EXPLICIT, RunPaths, locate_store, mark_store
from iterion.store.location import check_store_dir
from iterion.store.lock import RunLock, is_held, read_owner
from iterion.store.refs import MIN_PREFIX, short_ids
from iterion.store.reserve import (
    ensure_reserve,
    is_storage_error,
    release_reserve,
    reserve_floor,
    reserve_size,
)
from iterion.store.summary import RunSummary

if TYPE_CHECKING:
    from datetime import datetime

    # the models (pydantic) are imported where a document is read or written
    from iterion.store.artifacts import ArtifactStore
    from iterion.store.attachments import AttachmentStore
    from iterion.store.checkpoint import Checkpoint
    from iterion.store.docstore import EventAppender, RunDocumentStore
    from iterion.store.events import Event
    from iterion.store.interactions import InteractionStore
    from iterion.store.run_doc import RunDoc
    from iterion.store.runindex import IndexRow, Page

STALE_AFTER_S = 60.0  # --force-stale guard (docs/user-guide.md "Locks and takeover"): no event flush for this long

__all__ = ["RUNS_DIR", "STALE_AFTER_S", "CorruptRun", "Store"]


class Store:
    def __init__(self, root: Path, *, origin: str = EXPLICIT, docs: RunDocumentStore | None = None) -> None:
        self.root = Path(root)
        self.origin = origin  # how it was found (iterion.store.layout: explicit, env, legacy, git, project)
        self.runs_dir = self.root / RUNS_DIR
        self.docs: RunDocumentStore = docs if docs is not None else FsRunDocs(self.root)

    @classmethod
    def open(cls, explicit: Path | None = None, cwd: Path | None = None) -> Store:
        """The store a command names (or the default one, found like git finds its repository); a
        path that cannot be a store directory (a file, a device, a path under a file) is refused
        here, before anything is written."""
        where = locate_store(explicit, cwd or Path.cwd())
        return cls(check_store_dir(where.root), origin=where.origin)

    @property
    def shared(self) -> bool:
        """Run documents live in a store several machines share (JetStream): a local lock or a
        local file proves nothing about a run another machine executes."""
        return self.docs.shared

    def where(self) -> str:
        """Where the run documents are, for messages (a directory or a nats:// URL)."""
        return self.docs.where()

    def close(self) -> None:
        self.docs.close()

    # -- layout (local to this machine) -------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / validate_run_id(run_id)

    def paths(self, run_id: str) -> RunPaths:
        return RunPaths(self.run_dir(run_id))

    def track_dir(self, run_id: str) -> Path:
        return self.paths(run_id).track

    def exists(self, run_id: str) -> bool:
        return self.docs.exists(run_id)

    # -- the run document -------------------------------------------------------------------------
    def create_run(self, doc: RunDoc) -> RunDoc:
        """Persist a new run (version 1) in the backend. Refuses an id that already exists.

        On files this also makes the run's space reserve, and a full (or read-only) disk removes
        the partial run directory and raises StoreFullError: no half-made run is left behind."""
        if self.shared:
            try:
                self.run_dir(doc.id).mkdir(parents=True, exist_ok=True)  # the local half (lock, track)
            except OSError as exc:
                if not is_storage_error(exc):
                    raise
                raise StoreFullError.from_os_error(exc, self.root, "no run was created") from None
        created = self.docs.create_run(doc)
        mark_store(self.root)  # from now on the lookup finds it (iterion/store/layout.py)
        return created

    def run_names(self) -> set[str]:
        """The friendly names in use (a new run's name is picked outside them)."""
        return self.docs.run_names()

    def discard_new_run(self, run_id: str) -> None:
        """Remove a run that never started (its creation failed half-way): every trace of it."""
        self.docs.discard_run(run_id)
        if self.shared:
            import shutil

            shutil.rmtree(self.run_dir(run_id), ignore_errors=True)

    def ensure_reserve(self, run_id: str) -> None:
        """(Re)make the run's space reserve (resume does, before it claims the run); one that still
        holds its floor is left untouched. A shared store records the run's end off this disk:
        no reserve is needed there."""
        if self.shared:
            return
        paths = self.paths(run_id)
        try:
            ensure_reserve(paths.dir, reserve_size(paths.run_json), reserve_floor(paths.run_json))
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            raise StoreFullError.from_os_error(exc, self.root) from None

    def release_reserve(self, run_id: str) -> bool:
        return release_reserve(self.run_dir(run_id))

    def load_run(self, run_id: str) -> RunDoc:
        return self.docs.load_run(run_id)

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc:
        """Write ``doc`` if the stored version is ``expected_version``; else StaleWriteError.

        On success ``doc.version`` is ``expected_version + 1`` and ``updated_at`` is now.
        """
        return self.docs.save_run(doc, expected_version)

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        """Load, apply ``mutate``, save with CAS; on a concurrent write re-read and re-apply."""
        return self.docs.update_run(run_id, mutate, attempts=attempts)

    def list_runs(self) -> list[RunDoc]:
        """Every run, oldest first (ids are time-ordered). Unreadable documents are skipped
        (``corrupt_runs`` lists them)."""
        return self.docs.list_runs()

    def list_entries(self) -> list[RunDoc | CorruptRun]:
        """Every run, oldest first: its document, or a CorruptRun when it cannot be read."""
        return self.docs.list_entries()

    def list_summaries(self) -> list[RunSummary | CorruptRun]:
        """``list_entries`` as the run list shows it (``iterion.store.summary``): on files without
        validating whole documents (nor importing their models) unless one is not as written."""
        if isinstance(self.docs, FsRunDocs):
            return self.docs.list_summaries()
        return [e if isinstance(e, CorruptRun) else RunSummary.of(e) for e in self.docs.list_entries()]

    def index_rows(self) -> list[IndexRow]:
        """Every run's summary row (``iterion.store.runindex``), any order: from the run index on
        files, from the documents elsewhere."""
        if isinstance(self.docs, FsRunDocs):
            return list(self.docs.index.rows().values())
        rows = getattr(self.docs, "index_rows", None)  # JetStream: its summaries bucket
        if rows is not None:
            return list(rows())
        from iterion.store.runindex import corrupt_row, row_of_doc

        return [corrupt_row(e.id, e.detail, None) if isinstance(e, CorruptRun) else row_of_doc(e, None)
                for e in self.docs.list_entries()]

    def run_page(self, *, status: set[str] | None = None, workflow: str | None = None, since: datetime | None = None,
                 after: str | None = None, limit: int | None = None, rows: list[IndexRow] | None = None) -> Page:
        """A page of the run list, newest first (``iterion.store.runindex.select``); the shown rows
        are checked against their documents (an edit from outside iterion shows). ``rows``: the
        result of an ``index_rows`` call the caller already made."""
        from iterion.store.runindex import select

        page = select(self.index_rows() if rows is None else rows, status=status, workflow=workflow, since=since, after=after, limit=limit)
        if isinstance(self.docs, FsRunDocs):
            fresh = [self.docs.index.fresh(r) for r in page.rows]
            page = page._replace(rows=[r for r in fresh if r is not None])
        return page

    def corrupt_runs(self) -> list[CorruptRun]:
        return [r for r in self.list_entries() if isinstance(r, CorruptRun)]

    def resolve_run(self, ref: str) -> str:
        """A run id from an id, a unique friendly name or a unique id prefix (>= 4 characters).

        A reference no run can have (too long for a file name, control characters) is refused
        first, and every message shows it escaped and cut, so it stays on one line. A prefix that
        several runs share says how many ("type more"); one under 4 characters says "too short"."""
        check_run_ref(ref)
        try:
            if self.exists(ref):
                return ref
        except ValueError:  # not even a valid id: it can only be a (non-matching) name
            pass
        entries = self.index_rows()  # a corrupt run still owns its id (its prefix is not "unique" elsewhere)
        named = [r.id for r in entries if not r.corrupt and r.name == ref]
        if len(named) == 1:
            return named[0]
        if named:  # names are unique since they are made so at creation; older stores may repeat one
            raise AmbiguousRunRefError(f"ambiguous: {len(named)} runs are named {display_ref(ref)}",
                                   hint=f"pass one of their ids: {', '.join(short_ids(named).values())}")
        lowered = ref.lower()
        if len(ref) < MIN_PREFIX and all(c in "0123456789abcdef" for c in lowered):
            raise RunNotFoundError(f"run id prefix {display_ref(ref)} is too short: "
                                   f"type at least {MIN_PREFIX} characters",
                                   hint="list runs and their short ids with `iterion inspect`")
        hits = sorted(r.id for r in entries if r.id.startswith(lowered)) if len(ref) >= MIN_PREFIX else []
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise RunNotFoundError(f"run {display_ref(ref)} not found in {self.where()}",
                                   hint="list runs with `iterion inspect --nats URL`" if self.shared
                                   else "list runs with `iterion inspect`, or pass --store-dir")
        shown = short_ids([r.id for r in entries])
        raise AmbiguousRunRefError(f"ambiguous: {len(hits)} runs start with {display_ref(ref)}; type more",
                               hint="e.g. " + ", ".join(shown[h] for h in hits[:5])
                                    + (", ..." if len(hits) > 5 else ""))

    def short_id(self, run_id: str) -> str:
        """``run_id``'s shortest unique prefix in this store (what listings highlight)."""
        from iterion.store.runindex import unique_prefix_length

        ids = sorted(r.id for r in self.index_rows() if r.id != run_id)
        return run_id[:unique_prefix_length(ids, run_id)]

    # -- checkpoint -------------------------------------------------------------------------------
    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None:
        self.docs.save_checkpoint(run_id, checkpoint)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        return self.docs.load_checkpoint(run_id)

    def has_checkpoint(self, run_id: str) -> bool:
        return self.docs.has_checkpoint(run_id)

    def checkpoint_location(self, run_id: str) -> str:
        """Where the run's checkpoint is (a path, or its place in the shared store), for messages."""
        return self.docs.checkpoint_location(run_id)

    # -- events -----------------------------------------------------------------------------------
    def events(self, run_id: str) -> EventAppender:
        """The process-wide appender of this run (one per run so threads share the seq)."""
        return self.docs.events(run_id)

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        return self.docs.append_event(run_id, type, node=node, iteration=iteration, payload=payload)

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        return self.docs.read_events(run_id, after_seq=after_seq)

    def last_flush_time(self, run_id: str) -> float | None:
        """When the run's last event was written (POSIX seconds), or None with no events yet."""
        return self.docs.last_flush_time(run_id)

    def check_stale(self, run_id: str, *, now: float | None = None, threshold_s: float = STALE_AFTER_S,
                    own_lock: RunLock | None = None) -> None:
        """Refuse (StatusRefusedError) unless a `running` run is provably ownerless: no live
        execution lock and no event flushed in the last ``threshold_s`` seconds (--force-stale).

        Pass ``own_lock`` when the caller already holds the run's lock (then the probe is skipped:
        holding it already proves no other process does). With a shared store the lock only
        speaks for this machine; the last event's time speaks for every machine."""
        run_dir = self.run_dir(run_id)
        if not (own_lock is not None and own_lock.held) and is_held(run_dir):
            owner = read_owner(run_dir) or {}
            raise StatusRefusedError(
                f"run {run_id} still has a live owner (pid {owner.get('pid')} on {owner.get('host')} holds its lock); "
                "--force-stale only takes over a run whose owner is gone",
                hint=f"inspect it with `iterion inspect --run-id {run_id}`, or cancel it")
        flushed = self.last_flush_time(run_id)
        if flushed is not None:
            age = (time.time() if now is None else now) - flushed
            if age < threshold_s:
                raise StatusRefusedError(
                    f"run {run_id} flushed an event {max(age, 0):.0f}s ago (less than {threshold_s:.0f}s): "
                    "it may still have an owner",
                    hint=f"wait {threshold_s - age:.0f}s more, or inspect it with `iterion inspect --run-id {run_id}`")

    # -- per-run pieces ---------------------------------------------------------------------------
    def lock(self, run_id: str) -> RunLock:
        return RunLock(self.run_dir(run_id))

    def is_locked(self, run_id: str) -> bool:
        return is_held(self.run_dir(run_id))

    def artifacts(self, run_id: str) -> ArtifactStore:
        """The run's published artifacts (files under the run's directory, or the shared store's
        object store)."""
        return self.docs.artifacts(run_id, self.run_dir(run_id))

    def interactions(self, run_id: str) -> InteractionStore:
        from iterion.store.interactions import InteractionStore

        return InteractionStore(self.run_dir(run_id))

    def attachments(self, run_id: str) -> AttachmentStore:
        """The run's attachments: the staged copy is always a local file (tools read its path);
        a shared store also keeps the bytes in its object store and re-materialises them here."""
        return self.docs.attachments(run_id, self.run_dir(run_id))
