"""The filesystem backend of the run-document store (the default): ``<store>/runs/<run>/``.

``run.json``, ``checkpoint.json`` and ``events.jsonl`` of each run, exactly as the embedded store
always wrote them (see ``iterion/store/__init__.py`` for the layout). ``save_run`` is a
compare-and-swap on the document's ``version``: the check and the rename happen under a short
flock (``runs/<run>/cas.lock``) so two processes cannot both win. ``iterion.store.store.Store``
uses this backend unless it is given another one (``docs=``).

The document models (pydantic) are imported by the methods that read or write one, not with
this module: listing runs (``list_summaries``) needs none of them (issue 14, point 10).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gitrefs.persist.filelock import file_lock
from gitrefs.persist.killpoint import kill_point
from iterion.store.docstore import CorruptRun
from iterion.store.errors import (
    CorruptDocumentError,
    RunExistsError,
    RunNotFoundError,
    StaleWriteError,
    StoreFullError,
)
from iterion.store.ids import validate_run_id
from iterion.store.layout import RunPaths
from iterion.store.names import NameIndex, indexable
from iterion.store.refs import unique_name
from iterion.store.reserve import ensure_reserve, is_storage_error, reserve_size
from iterion.store.runindex import IndexRow, RunIndex, corrupt_row, row_of_doc
from iterion.store.summary import RunSummary, read_summary
from iterion.store.timeutil import utcnow

if TYPE_CHECKING:
    from pydantic import BaseModel

    from iterion.store.artifacts import ArtifactStore
    from iterion.store.attachments import AttachmentStore
    from iterion.store.checkpoint import Checkpoint
    from iterion.store.events import Event, EventLog
    from iterion.store.run_doc import RunDoc
    from iterion.store.spend import SpendCounter

RUNS_DIR = "runs"
NAMES_LOCK = "names.lock"  # at the store root: serializes picking a unique run name

M = TypeVar("M", bound="BaseModel")


def read_doc(path: Path, cls: type[M]) -> M:
    """read_model with a one-line CorruptDocumentError for an unreadable or too-new document."""
    from pydantic import ValidationError

    from gitrefs.persist.model import FormatVersionError, read_model

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


class FsRunDocs:
    """Run documents, checkpoints and events as files under ``<root>/runs/<run>/``."""

    shared = False  # one machine's files: the local lock and reserve are meaningful

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / RUNS_DIR
        self._logs: dict[str, EventLog] = {}
        self._logs_lock = threading.Lock()
        self.index = RunIndex(self.root, self.runs_dir, self._index_row, lambda rid: self.paths(rid).cas_lock)

    def where(self) -> str:
        """Where the runs are, for messages."""
        return str(self.runs_dir)

    def paths(self, run_id: str) -> RunPaths:
        return RunPaths(self.runs_dir / validate_run_id(run_id))

    def exists(self, run_id: str) -> bool:
        return self.paths(run_id).run_json.is_file()

    # -- the run document -------------------------------------------------------------------------
    def create_run(self, doc: RunDoc) -> RunDoc:
        """Persist a new run (version 1) with its space reserve. Refuses an id that already exists.

        A full (or read-only) disk while creating it removes the partial run directory and raises
        StoreFullError; any other failure before run.json is written removes it too: no half-made
        run is left behind."""
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
                self._write_indexed(paths, doc)
            ensure_reserve(paths.dir, reserve_size(paths.run_json))
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            if created:
                self.discard_run(doc.id)
                if doc.name and indexable(doc.name):
                    self._name_index().release(doc.name, doc.id)
            raise StoreFullError.from_os_error(exc, self.root, "no run was created") from None
        except BaseException:  # any other refusal before run.json exists: no empty run directory left
            if created and not paths.run_json.exists():
                self.discard_run(doc.id)
            raise
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

    def discard_run(self, run_id: str) -> None:
        """Remove a run that never started (its creation failed half-way): every file of it."""
        shutil.rmtree(self.paths(run_id).dir, ignore_errors=True)
        self.index.forget(run_id)

    def load_run(self, run_id: str) -> RunDoc:
        from iterion.store.run_doc import RunDoc

        path = self.paths(run_id).run_json
        try:
            return read_doc(path, RunDoc)
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

    def save_run(self, doc: RunDoc, expected_version: int) -> RunDoc:
        """Write ``doc`` if the on-disk version is ``expected_version``; else StaleWriteError.

        On success ``doc.version`` is ``expected_version + 1`` and ``updated_at`` is now.
        """
        paths = self.paths(doc.id)
        with file_lock(paths.cas_lock):
            found = self.load_run(doc.id).version
            if found != expected_version:
                raise StaleWriteError(doc.id, expected_version, found)
            new = doc.model_copy(update={"version": expected_version + 1, "updated_at": utcnow()})
            self._write_indexed(paths, new)
        doc.version, doc.updated_at = new.version, new.updated_at
        return doc

    def _write_indexed(self, paths: RunPaths, doc: RunDoc) -> None:
        """run.json, then its index row (the order of iterion/store/runindex.py; the caller holds
        the run's cas.lock)."""
        self.index.mark_pending(doc.id)
        _write_model(paths.run_json, doc)
        kill_point("run-index")
        try:
            st: os.stat_result | None = os.stat(paths.run_json)
        except OSError:
            st = None
        self.index.record(row_of_doc(doc, st))

    def _index_row(self, run_id: str) -> IndexRow | None:
        """The index row of run.json as it is on disk (None: no run.json)."""
        run_json = self.paths(run_id).run_json
        try:
            st = os.stat(run_json)
        except OSError:
            try:
                return corrupt_row(run_id, "not a regular file", os.lstat(run_json))  # a dangling link
            except OSError:
                return None
        try:
            return row_of_doc(self.load_run(run_id), st)
        except CorruptDocumentError as exc:
            return corrupt_row(run_id, exc.detail, st)
        except IsADirectoryError:
            return corrupt_row(run_id, "not a regular file", st)
        except RunNotFoundError:
            return None

    def update_run(self, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
        return update_with_retry(self, run_id, mutate, attempts=attempts)

    def list_runs(self) -> list[RunDoc]:
        return [r for r in self.list_entries() if not isinstance(r, CorruptRun)]

    def list_entries(self) -> list[RunDoc | CorruptRun]:
        """Every run directory holding a run.json, oldest first: its document, or a CorruptRun
        (id from the directory name) when run.json cannot be read or parsed."""
        return self._entries(self.load_run)

    def list_summaries(self) -> list[RunSummary | CorruptRun]:
        """``list_entries`` as the run list shows it, the same runs in the same order: each
        document read plainly (``iterion.store.summary``), and through RunDoc whenever the plain
        read is not sure, so a corrupt one is the same CorruptRun with the same words."""
        return self._entries(self._summary)

    def _summary(self, run_id: str) -> RunSummary:
        try:
            summary = read_summary(self.paths(run_id).run_json.read_bytes())
        except OSError:
            summary = None
        return summary if summary is not None else RunSummary.of(self.load_run(run_id))

    def _entries(self, load: Callable[[str], Any]) -> list[Any]:
        if not self.runs_dir.is_dir():
            return []
        out: list[Any] = []
        for d in sorted(self.runs_dir.iterdir()):
            run_json = d / "run.json"
            if run_json.is_file():
                try:
                    out.append(load(d.name))
                except CorruptDocumentError as exc:
                    out.append(CorruptRun(d.name, run_json, exc.detail))
                except ValueError:  # a directory name that is no run id: not a run
                    continue
            elif run_json.exists() or run_json.is_symlink():
                out.append(CorruptRun(d.name, run_json, "not a regular file"))
        return out

    # -- checkpoint -------------------------------------------------------------------------------
    def save_checkpoint(self, run_id: str, checkpoint: Checkpoint) -> None:
        checkpoint.run_id = run_id
        checkpoint.written_at = utcnow()
        _write_model(self.paths(run_id).checkpoint_json, checkpoint)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        from iterion.store.checkpoint import Checkpoint

        path = self.paths(run_id).checkpoint_json
        fix = "restore checkpoint.json from a backup (resume and rewind need it), or start a new run"
        try:
            cp = read_doc(path, Checkpoint)
        except FileNotFoundError:
            return None
        except CorruptDocumentError as exc:
            if "newer than this iterion" in exc.detail:
                raise  # a format from a newer iterion: not corrupt, the message says what to do
            raise CorruptDocumentError(f"run {run_id}: its checkpoint.json is corrupt ({exc.detail}): {path}",
                                       detail=exc.detail, hint=fix) from None
        if cp.run_id and cp.run_id != run_id:  # another run's checkpoint copied in: resuming it would mix two runs
            raise CorruptDocumentError(f"run {run_id}: its checkpoint.json belongs to run {cp.run_id}: {path}",
                                       detail=f"belongs to run {cp.run_id}", hint=fix)
        return cp

    def has_checkpoint(self, run_id: str) -> bool:
        return self.paths(run_id).checkpoint_json.is_file()

    def checkpoint_location(self, run_id: str) -> str:
        return str(self.paths(run_id).checkpoint_json)

    # -- events -----------------------------------------------------------------------------------
    def events(self, run_id: str) -> EventLog:
        """The process-wide appender of this run (one per run so threads share the seq)."""
        with self._logs_lock:
            log = self._logs.get(run_id)
            if log is None:
                from iterion.store.events import EventLog

                log = self._logs[run_id] = EventLog(self.paths(run_id).dir)
            return log

    def append_event(self, run_id: str, type: str, *, node: str | None = None, iteration: int | None = None,
                     payload: dict[str, Any] | None = None) -> Event:
        return self.events(run_id).append(type, node=node, iteration=iteration, payload=payload)

    def read_events(self, run_id: str, *, after_seq: int = 0) -> list[Event]:
        from iterion.store.events import read_events

        return read_events(self.paths(run_id).dir, after_seq=after_seq)

    def last_flush_time(self, run_id: str) -> float | None:
        """POSIX time of the last flush to events.jsonl (its mtime), or None with no events yet."""
        from iterion.store.events import last_flush_time

        return last_flush_time(self.paths(run_id).dir)

    # -- artifacts and attachments: files under the run's directory -------------------------------
    def artifacts(self, run_id: str, run_dir: Path) -> ArtifactStore:
        from iterion.store.artifacts import ArtifactStore

        return ArtifactStore(run_dir)

    def attachments(self, run_id: str, run_dir: Path) -> AttachmentStore:
        from iterion.store.attachments import AttachmentStore

        return AttachmentStore(run_dir)

    def spend_counter(self) -> SpendCounter:
        # lazily: the counter's document model (pydantic) stays out of a plain listing's start-up
        from iterion.store.spend import FileSpendCounter

        return FileSpendCounter(self.root)  # <store>/spend/, beside the run documents

    def close(self) -> None:
        pass


def _write_model(path: Path, model: BaseModel) -> None:
    from gitrefs.persist.model import write_model

    write_model(path, model)


def update_with_retry(store: Any, run_id: str, mutate: Callable[[RunDoc], None], *, attempts: int = 5) -> RunDoc:
    """Load, apply ``mutate``, save with CAS; on a concurrent write re-read and re-apply (every backend)."""
    for attempt in range(attempts):
        doc = store.load_run(run_id)
        expected = doc.version
        mutate(doc)
        try:
            return store.save_run(doc, expected)
        except StaleWriteError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
