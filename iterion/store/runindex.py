"""The run index: one summary row per run, so a listing never opens run documents.

A derived cache of the file store (``<store>/run-index.json``); the run documents stay the
source of truth. docs/technical/durability.md ("Run index") states the write order and why a
SIGKILL anywhere never loses a run from the list nor shows a wrong status:

writer (``FsRunDocs.create_run`` / ``save_run``, under the run's ``.run.json.cas`` flock):
  1. ``mark_pending``: create ``run-index.pending/<run>`` and fsync that directory;
  2. write ``run.json`` (durable);                         -- kill point ``run-index`` (gitrefs/persist/killpoint.py)
  3. ``record``: under ``run-index.lock``, append the run's row to ``run-index.log`` (fsynced;
     a new run's, or once the log is over LOG_COMPACT bytes: merge the log into the index,
     replace the index durably, then empty the log);
  4. remove the pending marker.
reader (``RunIndex.rows``): load the index (missing, corrupt or of another format: rebuilt from
the documents, with a warning) and apply the log's rows on top (a torn last line ends it); a changed ``runs/`` directory mtime (a run made or removed by
anything but this code: gc, a copy, an older iterion) re-scans the directory names; every
pending marker's run is re-read under its ``.run.json.cas`` flock and the marker removed. A row is
replaced only by one of a higher or equal document version, so a reader's repair never undoes
a writer's newer row (so applying the log twice, after a kill between the index replace and the
log's truncation, changes nothing). Why a log: rewriting a 10,000-row index costs ~40 ms and a
run writes its document at every status change and twice per child process. The rows a listing shows are also checked against their run.json's
(mtime, size) and re-read when it differs (an edit or damage from outside iterion; shown, not saved).
"""

from __future__ import annotations

import json
import logging
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from gitrefs.persist.filelock import file_lock

INDEX_FILE = "run-index.json"
INDEX_LOCK = "run-index.lock"
LOG_FILE = "run-index.log"
LOG_COMPACT = 256 * 1024  # log bytes (~800 rows) past which a write merges the log into the index
PENDING_DIR = "run-index.pending"
FORMAT_VERSION = 1
CORRUPT = "corrupt"

log = logging.getLogger("iterion.store.runindex")


class IndexRow(NamedTuple):
    """One run as listings show it (times as the document's ISO strings)."""

    id: str
    name: str | None
    status: str
    workflow: str | None
    created: str | None
    updated: str | None
    failure_code: str | None
    error: str | None  # the run's error, or for a corrupt run what is wrong with run.json
    mode: str | None
    version: int
    parent: str | None  # the run it was forked from (options.forked_from.run_id)
    mtime_ns: int  # of the run.json this row was read from (JetStream: the document's KV revision)
    size: int  # of that run.json (JetStream: 0)

    @property
    def corrupt(self) -> bool:
        return self.status == CORRUPT


def row_of_doc(doc: Any, st: os.stat_result | None) -> IndexRow:
    """The row of a RunDoc (``st``: its run.json's stat)."""
    forked = doc.options.get("forked_from") if isinstance(doc.options, dict) else None
    parent = forked.get("run_id") if isinstance(forked, dict) else None
    return IndexRow(doc.id, doc.name, doc.status.value, doc.workflow_name, doc.created_at.isoformat(),
                    doc.updated_at.isoformat(), doc.failure_code, doc.error, doc.workspace_mode.value,
                    doc.version, parent if isinstance(parent, str) else None,
                    st.st_mtime_ns if st else 0, st.st_size if st else 0)


def corrupt_row(run_id: str, detail: str, st: os.stat_result | None) -> IndexRow:
    return IndexRow(run_id, None, CORRUPT, None, None, None, None, detail, None, -1, None,
                    st.st_mtime_ns if st else 0, st.st_size if st else 0)


class Page(NamedTuple):
    rows: list[IndexRow]  # newest first
    next: str | None  # the cursor of the next page (the last shown id), None on the last page
    total: int  # how many runs match the filters, on every page
    more: int  # how many matching runs come after this page


def select(rows: Iterable[IndexRow], *, status: set[str] | None = None, workflow: str | None = None,
           since: datetime | None = None, after: str | None = None, limit: int | None = None) -> Page:
    """Filter and page ``rows`` (any order): newest first (ids are time-ordered); ``after`` is a
    cursor (a run id): only runs older than it. ``limit`` None: every match."""
    since_key = since.isoformat() if since is not None else None
    matched: list[IndexRow] = []
    for r in rows:
        if status is not None and r.status not in status:
            continue
        if workflow is not None and r.workflow != workflow:
            continue
        if since is not None and (r.created is None or not _at_or_after(r.created, since, since_key)):
            continue
        matched.append(r)
    matched.sort(key=lambda r: r.id, reverse=True)
    total = len(matched)
    start = 0
    if after is not None:
        start = next((i for i, r in enumerate(matched) if r.id < after), total)
    shown = matched[start:] if limit is None else matched[start:start + limit]
    rest = total - start - len(shown)
    return Page(shown, shown[-1].id if rest and shown else None, total, rest)


def _at_or_after(created: str, since: datetime, since_key: str | None) -> bool:
    try:
        return datetime.fromisoformat(created) >= since
    except ValueError:
        return False


def unique_prefix_length(sorted_ids: list[str], rid: str) -> int:
    """The shortest prefix of ``rid`` no other id of ``sorted_ids`` shares (iterion.store.refs rule),
    from its two neighbours alone."""
    from iterion.store.refs import MIN_PREFIX, _common

    i = bisect_left(sorted_ids, rid)
    before = sorted_ids[i - 1] if i > 0 else None
    j = i + 1 if i < len(sorted_ids) and sorted_ids[i] == rid else i
    after = sorted_ids[j] if j < len(sorted_ids) else None
    shared = max(_common(rid, before) if before else 0, _common(rid, after) if after else 0)
    return min(len(rid), max(MIN_PREFIX, shared + 1))


class RunIndex:
    """The index of the file store at ``root`` (runs under ``runs_dir``).

    ``read_row(run_id)`` reads one run document into a row (the store's plain reader);
    ``cas_lock(run_id)`` is the path of the run's compare-and-swap lock."""

    def __init__(self, root: Path, runs_dir: Path, read_row: Callable[[str], IndexRow | None],
                 cas_lock: Callable[[str], Path]) -> None:
        self.root = root
        self.runs_dir = runs_dir
        self.path = root / INDEX_FILE
        self.lock_path = root / INDEX_LOCK
        self.pending_dir = root / PENDING_DIR
        self.log_path = root / LOG_FILE
        self._read_row = read_row
        self._cas_lock = cas_lock
        self._cache: tuple[tuple[int, ...], int, dict[str, IndexRow]] | None = None

    # -- writer side ------------------------------------------------------------------------------
    def mark_pending(self, run_id: str) -> None:
        """Step 1: a durable marker that run.json is about to change (before it changes)."""
        try:
            self.pending_dir.mkdir(exist_ok=True)
            fd = os.open(self.pending_dir / run_id, os.O_WRONLY | os.O_CREAT, 0o644)
            os.close(fd)
            dfd = os.open(self.pending_dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            # no marker: the index may miss this write; drop it so the next reader rebuilds it
            self.path.unlink(missing_ok=True)

    def record(self, row: IndexRow) -> None:
        """Step 3 and 4: put ``row`` in the index (a line of the log), then remove the run's marker."""
        try:
            with file_lock(self.lock_path):
                if row.version <= 1 or not self.path.exists():
                    self._record_merged(row)
                else:
                    self._append(row)
            (self.pending_dir / row.id).unlink(missing_ok=True)
        except OSError:  # a full disk: the marker (if any) makes the next reader repair it
            pass

    def _record_merged(self, row: IndexRow) -> None:
        """``row`` merged into the index itself (a new run: its directory moved runs/'s mtime,
        which is recorded here after a rescan, so readers need not rescan)."""
        rows, _ = self._load_locked()
        _merge(rows, row)
        runs_mtime = self._runs_mtime()  # (read before the scan: a change after it shows next time)
        if self._recorded_runs_mtime != runs_mtime:
            self._rescan(rows)
            self._recorded_runs_mtime = runs_mtime
        self._save_locked(rows)

    def _append(self, row: IndexRow) -> None:
        line = json.dumps(list(row), separators=(",", ":")).encode() + b"\n"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > LOG_COMPACT:
            rows, _ = self._load_locked()
            self._save_locked(rows)

    def forget(self, run_id: str) -> None:
        """A run removed from the store (a discarded launch)."""
        try:
            with file_lock(self.lock_path):
                rows, _ = self._load_locked()
                if rows.pop(run_id, None) is not None:
                    self._save_locked(rows)
            (self.pending_dir / run_id).unlink(missing_ok=True)
        except OSError:
            pass

    # -- reader side ------------------------------------------------------------------------------
    def rows(self) -> dict[str, IndexRow]:
        """Every run's row, repaired as the module doc says (a cheap check when nothing changed)."""
        for rid in self._pending():
            self._repair(rid)
        key, runs_mtime = self._stamp(), self._runs_mtime()
        if self._cache is not None and key[0] != 0 and self._cache[0] == key and self._cache[1] == runs_mtime:
            return self._cache[2]
        try:
            with file_lock(self.lock_path):
                rows, changed = self._load_locked()
                if self._recorded_runs_mtime != runs_mtime and self._rescan(rows):
                    # saved only when a run came or went: a listing that finds nothing new writes
                    # nothing (a refused command leaves the store as it was)
                    self._recorded_runs_mtime = runs_mtime
                    changed = True
                if changed:
                    self._save_locked(rows)
        except OSError:  # a read-only store: list from the documents without saving
            rows = self._rebuild()
        self._cache = (self._stamp(), runs_mtime, rows)
        return rows

    def fresh(self, row: IndexRow) -> IndexRow | None:
        """``row`` as its run.json is now (re-read when its stat differs); None: the run is gone."""
        try:
            st = os.stat(self.runs_dir / row.id / "run.json")
        except OSError:
            st = None
        if st is not None and st.st_mtime_ns == row.mtime_ns and st.st_size == row.size:
            return row
        # not saved: a listing stays a read (the next write of that run, or a rebuild, records it)
        new = self._read_row(row.id)
        return new

    # -- internals --------------------------------------------------------------------------------
    _recorded_runs_mtime: int = -1

    def _stamp(self) -> tuple[int, ...]:
        """The index file's and the log's (mtime, inode, size): equal, nothing was written."""
        out: list[int] = []
        for path in (self.path, self.log_path):
            try:
                st = os.stat(path)
            except OSError:
                out += [0, 0, 0]
                continue
            out += [st.st_mtime_ns, st.st_ino, st.st_size]
        return tuple(out)

    def _runs_mtime(self) -> int:
        try:
            return os.stat(self.runs_dir).st_mtime_ns
        except OSError:
            return 0

    def _pending(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.pending_dir) if not n.startswith("."))
        except OSError:
            return []

    def _load_locked(self) -> tuple[dict[str, IndexRow], bool]:
        """The index's rows (rebuilt, and True, when missing, corrupt or of another format)."""
        try:
            raw = json.loads(self.path.read_bytes())
            if type(raw) is not dict or raw.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"format {raw.get('format_version') if type(raw) is dict else '?'}")
            rows = {r[0]: IndexRow(*r) for r in raw["rows"]}
            self._recorded_runs_mtime = int(raw["runs_mtime_ns"])
            self._apply_log(rows)
            return rows, False
        except FileNotFoundError:
            why = "missing"
        except (OSError, ValueError, TypeError, KeyError, IndexError) as exc:
            why = f"damaged ({type(exc).__name__}: {str(exc)[:80]})"
        if not self.runs_dir.is_dir():
            self._recorded_runs_mtime = self._runs_mtime()
            return {}, False
        self._recorded_runs_mtime = self._runs_mtime()
        rows = self._rebuild()
        if set(rows) - set(self._pending()):  # (a new store's first run is no news)
            log.warning("warning: the run index %s is %s; rebuilt from the run documents", self.path, why)
        return rows, True

    def _apply_log(self, rows: dict[str, IndexRow]) -> None:
        """The log's rows over the index's (a torn or damaged line ends the log: its write was
        not complete, so its run still has its pending marker)."""
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return
        for line in data.split(b"\n"):
            if not line:
                continue
            try:
                row = IndexRow(*json.loads(line))
            except (ValueError, TypeError):
                break
            _merge(rows, row)

    def _save_locked(self, rows: dict[str, IndexRow]) -> None:
        from gitrefs.persist.atomic import (
            atomic_write_bytes,  # (the writers' import: a listing that saves nothing skips it)
        )

        body = {"format_version": FORMAT_VERSION, "runs_mtime_ns": self._recorded_runs_mtime,
                "rows": [list(rows[k]) for k in sorted(rows)]}
        atomic_write_bytes(self.path, json.dumps(body, separators=(",", ":")).encode())
        # after the index holds every logged row: a kill before this re-applies them (no change)
        if self.log_path.exists():
            os.truncate(self.log_path, 0)

    def _dirs(self) -> list[str]:
        from iterion.store.ids import validate_run_id

        out = []
        try:
            names = os.listdir(self.runs_dir)
        except OSError:
            return []
        for name in names:
            try:
                validate_run_id(name)
            except ValueError:
                continue
            out.append(name)
        return out

    def _rebuild(self) -> dict[str, IndexRow]:
        rows: dict[str, IndexRow] = {}
        for rid in self._dirs():
            row = self._read_row(rid)
            if row is not None:
                rows[rid] = row
        return rows

    def _rescan(self, rows: dict[str, IndexRow]) -> bool:
        """Runs made or removed behind the index's back (names only; new ones read)."""
        on_disk = set(self._dirs())
        changed = False
        for rid in set(rows) - on_disk:
            del rows[rid]
            changed = True
        for rid in on_disk - set(rows):
            row = self._read_row(rid)
            if row is not None:
                rows[rid] = row
                changed = True
        return changed

    def _repair(self, rid: str) -> None:
        """A pending marker: its write may not be in the index. Re-read under the run's lock (no
        writer is mid-step; the writer's lock order: the run's, then the index's), then drop it."""
        if not (self.runs_dir / rid).is_dir():  # discarded (its marker is made after its directory)
            self.forget(rid)
            return
        try:
            with file_lock(self._cas_lock(rid)):
                row = self._read_row(rid)
                with file_lock(self.lock_path):
                    rows, _ = self._load_locked()
                    if row is None:
                        rows.pop(rid, None)
                    else:
                        rows[rid] = row
                    self._save_locked(rows)
                (self.pending_dir / rid).unlink(missing_ok=True)
        except (OSError, ValueError):  # a read-only store, or a marker no run id can have
            pass


def _merge(rows: dict[str, IndexRow], row: IndexRow) -> None:
    """``row`` over the run's row unless that one is of a newer document version."""
    old = rows.get(row.id)
    if old is None or row.version >= old.version or old.corrupt:
        rows[row.id] = row


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``--since``: a duration back from now (``2h``, ``7d``) or an ISO date/time (``2026-12-01``,
    UTC when no zone is given). ValueError with a one-line message otherwise."""
    from datetime import UTC, timedelta

    from iterion import durations

    try:
        seconds = durations.parse_duration(text.strip(), bare_seconds=False)
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    except (durations.DurationError, OverflowError):
        pass
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"since {text!r} is neither a duration (2h, 7d) nor a date (2026-12-01)") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
