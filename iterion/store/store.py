"""The embedded file store: ``<store>/runs/<run>/`` holding one run's documents.

``save_run`` is a compare-and-swap on the run document's ``version`` so a stale writer (a
cancel racing a resume, a rewind racing a checkpoint) is refused instead of overwriting; the
check and the rename happen under a short flock so two processes cannot both win.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from iterion.store.artifacts import ArtifactStore
from iterion.store.attachments import AttachmentStore
from iterion.store.checkpoint import Checkpoint
from iterion.store.errors import (
    AmbiguousRunRefError,
    CorruptDocumentError,
    RunExistsError,
    RunNotFoundError,
    StaleWriteError,
    StatusRefusedError,
    StoreFullError,
)
from iterion.store.events import Event, EventLog, last_flush_time, read_events
from iterion.store.ids import check_run_ref, display_ref, validate_run_id
from iterion.store.interactions import InteractionStore
from iterion.store.layout import EXPLICIT, RunPaths, locate_store
from iterion.store.location import check_store_dir
from iterion.store.lock import RunLock, is_held, read_owner
from iterion.store.names import NameIndex, indexable
from iterion.store.refs import MIN_PREFIX, short_ids, unique_name
from iterion.store.reserve import (
    ensure_reserve,
    is_storage_error,
    release_reserve,
    reserve_floor,
    reserve_size,
)
from iterion.store.run_doc import RunDoc
from iterion.store.timeutil import utcnow
from persist import FormatVersionError, file_lock, read_model, write_model

RUNS_DIR = "runs"
NAMES_LOCK = "names.lock"  # at the store root: serializes picking a unique run name
STALE_AFTER_S = 60.0  # --force-stale guard (docs/user-guide.md "Locks and takeover"): no event flush for this long

M = TypeVar("M", bound=BaseModel)


def _read(path: Path, cls: type[M]) -> M:
    """read_model with a one-line CorruptDocumentError for an unreadable or too-new document."""
    try:
        return read_model(path, cls)
    except FileNotFoundError:
        raise
    except OSError as exc:
        detail = f"cannot be read ({exc.strerror or exc})"
        raise CorruptDocumentError(f"{path}: {detail}", detail=detail) from None
    except FormatVersionError as exc:
        raise CorruptDocumentError(f"{path}: {exc}", detail=str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "document"
        detail = f"unreadable {cls.__name__} ({where}: {first.get('msg')})"
        raise CorruptDocumentError(f"{path}: {detail}", detail=detail) from None


@dataclass(frozen=True)
class CorruptRun:
    """A run directory whose run.json cannot be read: listed as status ``corrupt``, never hidden."""

    id: str
    path: Path
    detail: str
    status: str = "corrupt"


class Store:
    def __init__(self, root: Path, *, origin: str = EXPLICIT) -> None:
        self.root = Path(root)
        self.origin = origin  # how it was found (iterion.store.layout: explicit, env, legacy, git, project)
        self.runs_dir = self.root / RUNS_DIR
        self._logs: dict[str, EventLog] = {}
        self._logs_lock = threading.Lock()

    @classmethod
    def open(cls, explicit: Path | None = None, cwd: Path | None = None) -> Store:
        """The store a command names (or the default one, found like git finds its repository); a
        path that cannot be a store directory (a file, a device, a path under a file) is refused
        here, before anything is written."""
        where = locate_store(explicit, cwd or Path.cwd())
        return cls(check_store_dir(where.root), origin=where.origin)

    # -- layout -----------------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / validate_run_id(run_id)

    def paths(self, run_id: str) -> RunPaths:
        return RunPaths(self.run_dir(run_id))

    def track_dir(self, run_id: str) -> Path:
        return self.paths(run_id).track

    def exists(self, run_id: str) -> bool:
        return self.paths(run_id).run_json.is_file()

    # -- the run document -------------------------------------------------------------------------
    def create_run(self, doc: RunDoc) -> RunDoc:
        """Persist a new run (version 1) with its space reserve. Refuses an id that already exists.

        A full (or read-only) disk while creating it removes the partial run directory and raises
        StoreFullError: no half-made run is left behind."""
        paths = self.paths(doc.id)
        created = not paths.dir.exists()
        try:
            paths.dir.mkdir(parents=True, exist_ok=True)
            # names.lock: the name check and the write of run.json are one step, so two launches
            # racing for one name cannot both get it (a later one takes a -2, -3, ... suffix)
            with file_lock(self.root / NAMES_LOCK), file_lock(paths.cas_lock):
                if paths.run_json.exists():
                    raise RunExistsError(f"run {doc.id} already exists")
                if doc.name and indexable(doc.name):
                    doc.name = self._name_index().claim(doc.name, doc.id)
                elif doc.name:  # a name no file can be called: checked against every run instead
                    doc.name = unique_name(doc.name, self._names(exclude=doc.id))
                doc.version = 1
                doc.created_at = doc.updated_at = utcnow()
                write_model(paths.run_json, doc)
            ensure_reserve(paths.dir, reserve_size(paths.run_json))
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            if created:
                self.discard_new_run(doc.id)
                if doc.name and indexable(doc.name):
                    self._name_index().release(doc.name, doc.id)
            raise StoreFullError.from_os_error(exc, self.root, "no run was created") from None
        return doc

    def run_names(self) -> set[str]:
        """The friendly names in use (a new run's name is picked outside them)."""
        try:
            return self._name_index().taken()
        except OSError:  # a read-only or damaged store: the claim at creation still decides
            return set()

    def _name_index(self) -> NameIndex:
        return NameIndex(self.root, lambda: [(r.id, r.name) for r in self.list_runs()], self.exists)

    def _names(self, *, exclude: str) -> set[str]:
        return {r.name for r in self.list_runs() if r.id != exclude and r.name}

    def discard_new_run(self, run_id: str) -> None:
        """Remove a run that never started (its creation failed half-way): every file of it."""
        shutil.rmtree(self.run_dir(run_id), ignore_errors=True)

    def ensure_reserve(self, run_id: str) -> None:
        """(Re)make the run's space reserve (resume does, before it claims the run); one that still
        holds its floor is left untouched."""
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
        path = self.paths(run_id).run_json
        try:
            return _read(path, RunDoc)
        except CorruptDocumentError as exc:
            if "newer than this iterion" in exc.detail:
                raise  # a format from a newer iterion: not corrupt, the message says what to do
            raise CorruptDocumentError(f"run {run_id}: its run.json is corrupt ({exc.detail}): {path}",
                                       detail=exc.detail,
                                       hint="restore run.json from a backup, or move the run directory aside; "
                                            "`iterion inspect` lists the run as corrupt") from None
        except IsADirectoryError:
            raise CorruptDocumentError(f"run {run_id}: its run.json is not a regular file: {path}",
                                       detail="not a regular file",
                                       hint="move the run directory aside") from None
        except FileNotFoundError:
            raise RunNotFoundError(f"run {run_id} not found in {self.runs_dir}",
                                   hint="list runs with `iterion inspect`, or pass --store-dir") from None

    def _disk_version(self, run_id: str) -> int:
        return self.load_run(run_id).version

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc:
        """Write ``doc`` if the on-disk version is ``expected_version``; else StaleWriteError.

        On success ``doc.version`` is ``expected_version + 1`` and ``updated_at`` is now.
        """
        paths = self.paths(doc.id)
        with file_lock(paths.cas_lock):
            found = self._disk_version(doc.id)
            if found != expected_version:
                raise StaleWriteError(doc.id, expected_version, found)
            new = doc.model_copy(update={"version": expected_version + 1, "updated_at": utcnow()})
            write_model(paths.run_json, new)
        doc.version, doc.updated_at = new.version, new.updated_at
        return doc

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        """Load, apply ``mutate``, save with CAS; on a concurrent write re-read and re-apply."""
        for attempt in range(attempts):
            doc = self.load_run(run_id)
            expected = doc.version
            mutate(doc)
            try:
                return self.save_run(doc, expected)
            except StaleWriteError:
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def list_runs(self) -> list[RunDoc]:
        """Every run, oldest first (ids are time-ordered). Unreadable documents are skipped
        (``corrupt_runs`` lists them)."""
        return [r for r in self.list_entries() if isinstance(r, RunDoc)]

    def list_entries(self) -> list[RunDoc | CorruptRun]:
        """Every run directory holding a run.json, oldest first: its document, or a CorruptRun
        (id from the directory name) when run.json cannot be read or parsed."""
        if not self.runs_dir.is_dir():
            return []
        out: list[RunDoc | CorruptRun] = []
        for d in sorted(self.runs_dir.iterdir()):
            run_json = d / "run.json"
            if run_json.is_file():
                try:
                    out.append(self.load_run(d.name))
                except CorruptDocumentError as exc:
                    out.append(CorruptRun(d.name, run_json, exc.detail))
                except ValueError:  # a directory name that is no run id: not a run
                    continue
            elif run_json.exists() or run_json.is_symlink():
                out.append(CorruptRun(d.name, run_json, "not a regular file"))
        return out

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
        entries = self.list_entries()  # a corrupt run still owns its id (its prefix is not "unique" elsewhere)
        named = [r.id for r in entries if isinstance(r, RunDoc) and r.name == ref]
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
        hits = [r.id for r in entries if r.id.startswith(lowered)] if len(ref) >= MIN_PREFIX else []
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise RunNotFoundError(f"run {display_ref(ref)} not found in {self.runs_dir}",
                                   hint="list runs with `iterion inspect`, or pass --store-dir")
        shown = short_ids([r.id for r in entries])
        raise AmbiguousRunRefError(f"ambiguous: {len(hits)} runs start with {display_ref(ref)}; type more",
                               hint="e.g. " + ", ".join(shown[h] for h in hits[:5])
                                    + (", ..." if len(hits) > 5 else ""))

    def short_id(self, run_id: str) -> str:
        """``run_id``'s shortest unique prefix in this store (what listings highlight)."""
        return short_ids([e.id for e in self.list_entries()] + [run_id]).get(run_id, run_id)

    # -- checkpoint -------------------------------------------------------------------------------
    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None:
        checkpoint.run_id = run_id
        checkpoint.written_at = utcnow()
        write_model(self.paths(run_id).checkpoint_json, checkpoint)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        try:
            return _read(self.paths(run_id).checkpoint_json, Checkpoint)
        except FileNotFoundError:
            return None

    def has_checkpoint(self, run_id: str) -> bool:
        return self.paths(run_id).checkpoint_json.is_file()

    # -- events -----------------------------------------------------------------------------------
    def events(self, run_id: str) -> EventLog:
        """The process-wide appender of this run (one per run so threads share the seq)."""
        with self._logs_lock:
            log = self._logs.get(run_id)
            if log is None:
                log = self._logs[run_id] = EventLog(self.run_dir(run_id))
            return log

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        return self.events(run_id).append(type, node=node, iteration=iteration, payload=payload)

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        return read_events(self.run_dir(run_id), after_seq=after_seq)

    def last_flush_time(self, run_id: str) -> float | None:
        return last_flush_time(self.run_dir(run_id))

    def check_stale(self, run_id: str, *, now: float | None = None, threshold_s: float = STALE_AFTER_S,
                    own_lock: RunLock | None = None) -> None:
        """Refuse (StatusRefusedError) unless a `running` run is provably ownerless: no live
        execution lock and no event flushed in the last ``threshold_s`` seconds (--force-stale).

        Pass ``own_lock`` when the caller already holds the run's lock (then the probe is skipped:
        holding it already proves no other process does)."""
        run_dir = self.run_dir(run_id)
        if not (own_lock is not None and own_lock.held) and is_held(run_dir):
            owner = read_owner(run_dir) or {}
            raise StatusRefusedError(
                f"run {run_id} still has a live owner (pid {owner.get('pid')} on {owner.get('host')} holds its lock); "
                "--force-stale only takes over a run whose owner is gone",
                hint=f"inspect it with `iterion inspect --run-id {run_id}`, or cancel it")
        flushed = last_flush_time(run_dir)
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
        return ArtifactStore(self.run_dir(run_id))

    def interactions(self, run_id: str) -> InteractionStore:
        return InteractionStore(self.run_dir(run_id))

    def attachments(self, run_id: str) -> AttachmentStore:
        return AttachmentStore(self.run_dir(run_id))
