"""Where a tracker's state lives on disk, and the order in which a capture commits it.

    <objects>/ab/cdef...                content-addressed blobs and manifests, shared by all runs
                                        (``shared_objects_dir``)
    <store>/runs/<run>/state.json       snapshot records, chain, label map, banks up to ``log_seq``
    <store>/runs/<run>/state.log        one JSON line per later commit (``StateLogRecord``, seq order)
    <store>/runs/<run>/statcache.json   path -> stat -> hash (a cache: losing it costs re-hashing),
                                        a hard link to <objects>/statcache/<blake3> (shared by content)
    <store>/runs/<run>/lock             flock: one capture or restore of a run at a time

Commit order: objects and manifest (flushed once) -> one line appended to state.log and
fdatasync'ed (the commit point). The first commit of a run writes state.json whole instead, and
every so often (``_COMPACT_MIN`` lines, or as many lines as state.json holds snapshots: amortised
constant per commit) the log is folded into a new state.json and removed. So a boundary costs
one appended line and one fdatasync, whatever the length of the run.

The executing process keeps the state in memory; a reader re-checks only the identity of the
two files (state.json's inode/size/mtime, the log's inode/size) and reads only lines appended
since it last looked, so no boundary re-reads or rewrites the run's whole history.

What a SIGKILL (or a crash) at any point leaves, and what repairs it:

* before the line is appended: objects nobody references (harmless); state as before;
* mid-append: a last line without its newline (or unparsable: a torn write). Readers ignore it
  (it was never committed: ``commit`` had not returned); the next writer, under the run lock,
  truncates the log back to its last complete line before appending;
* after the append, before the fdatasync returned: the line is in the page cache and readers
  see it committed; only a power loss can drop it, and then its objects, flushed before, are
  merely unreferenced;
* mid-compaction, before state.json's atomic rename: the old state.json and the whole log;
  after it, before the log's removal: the new state.json whose ``log_seq`` covers every line
  of the stale log, so readers skip them and the next writer removes it.

A complete line that does not parse before the last one, or a gap in the seq numbers, is not a
crash artefact: ``CorruptStoreError``. A state.json of format 1 (no log) reads as is.

A reader that must write nothing (a rewind's dry run: it works on a read-only store) opens the
store with ``scratch=DIR``: what its disk scan stores (objects, manifests) goes to DIR, the
store's own objects are only read, the stat cache is not saved, the run's lock is taken on a
read-only descriptor (no lock file is created), and a commit is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from gitrefs.ids import validate_id
from gitrefs.persist import VersionedModel, atomic_write_bytes, file_lock, fsync_dir, read_model, write_model
from gitrefs.persist.atomic import TMP_SUFFIX, is_temp_leftover
from gitrefs.persist.killpoint import kill_point
from workspacetrack.errors import CorruptStoreError, UnknownSnapshotError
from workspacetrack.fastext import FAST
from workspacetrack.ignore import RULE_FILES
from workspacetrack.models import (
    CacheRow,
    Entry,
    Manifest,
    RunState,
    SnapshotRecord,
    StatCacheDoc,
    StateLogRecord,
)
from workspacetrack.names import (
    all_clean,
    any_wire,
    from_wire,
    is_clean,
    keys_from_wire,
    list_from_wire,
    list_to_wire,
    to_wire,
)
from workspacetrack.objects import ObjectStore, digest_of

_MANIFEST_CACHE_SIZE = 6
_IDS_TAIL = re.compile(rb',"ids":"(blake3|git)"\}\s*\Z')  # how a manifest of format 2 ends
_DEPTH_TAIL = re.compile(rb',"depth":(\d+),"ids":"(?:blake3|git)"\}\s*\Z')
STATCACHE_DIR = "statcache"  # under the objects dir: stat caches shared by content (``save_cache``)
_COMPACT_MIN = 256  # log lines before the log may be folded into state.json
_RULE_SET = frozenset(RULE_FILES)
_RULE_NAMES = tuple(name.encode() for name in RULE_FILES)  # ``read_manifest_paths`` picks them all
# (objects dir, gc generation, manifest) -> (paths asked, their entries, the full state's count)
_PICKED: OrderedDict[tuple[Path, bytes | None, str], tuple[frozenset[str], Manifest, int]] = OrderedDict()
_PICKED_MAX = 8

M = TypeVar("M", bound=VersionedModel)


def _read(path: Path, cls: type[M]) -> M:
    """Load a document; a newer format or a damaged file becomes one clear user-facing error."""
    try:
        return read_model(path, cls)
    except ValidationError as exc:
        detail = exc.errors()[0].get("msg", str(exc)) if exc.errors() else str(exc)
        raise CorruptStoreError(f"cannot read {path}: {detail}") from None


def shared_objects_dir(root: Path, run_id: str) -> Path:
    """Where a tracker rooted at ``root`` keeps its objects.

    The engine roots each in-place run's tracker at ``<iterion store>/runs/<run>/track``; all
    those runs share ONE object store, ``<iterion store>/objects``, so identical content is
    stored once per store and ``iterion gc`` has one place to sweep. Any other root (the
    ``iterion track`` plumbing) keeps ``<root>/objects``, shared by the runs under that root.
    """
    if root.name == "track" and root.parent.name == run_id and root.parent.parent.name == "runs":
        return root.parent.parent.parent / "objects"
    return root / "objects"


class TrackStore:
    def __init__(self, root: Path, run_id: str, *, scratch: Path | None = None) -> None:
        validate_id(run_id, "run id")
        self.root = root
        self.run_id = run_id
        shared = shared_objects_dir(root, run_id)
        # a run recorded before the move keeps reading its own per-run objects
        legacy = (root / "objects",) if shared != root / "objects" else ()
        # read-only (module doc): new objects go to the scratch directory, the store's are only read
        self.read_only = scratch is not None
        self.objects = ObjectStore(scratch, (shared, *legacy)) if scratch is not None else ObjectStore(shared, legacy)
        self.run_dir = root / "runs" / run_id
        self._manifests: OrderedDict[str, Manifest] = OrderedDict()  # digest -> full state
        self._once: tuple[str, Manifest] | None = None  # read_manifest_once's last full state
        self._depths: dict[str, int] = {}
        self._epoch = 0
        # the run state as of the last load/commit, and the identity of what it was read from
        self._state: RunState | None = None
        self._state_ident: tuple[int, int, int] | None = None
        self._log_ino: int | None = None
        self._log_read = 0    # bytes of state.log looked at
        self._log_valid = 0   # bytes of state.log that are complete, committed lines
        self._log_lines = 0   # lines in state.log (compaction threshold)
        self._log_stale = 0   # of which already folded into state.json
        self._whole_snaps = 0  # snapshots state.json holds: the log is folded in once it has as many lines

    # -- locking ----------------------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[None]:
        with self._run_lock(), self.objects.shared():
            if self.objects.epoch != self._epoch:  # a gc swept: cached manifests may name gone objects
                self._epoch = self.objects.epoch
                self._manifests.clear()
                self._once = None
            self._clean_leftovers()
            yield

    @contextmanager
    def _run_lock(self) -> Iterator[None]:
        if not self.read_only:
            with file_lock(self.run_dir / "lock"):
                yield
            return
        # flock works on a read-only descriptor: a writer on another (writable) mount still waits
        try:
            fd = os.open(self.run_dir / "lock", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # never captured under a lock: nobody to wait for
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _clean_leftovers(self) -> None:
        """Temp files of a writer killed mid-write (never documents; objects dirs are left alone)."""
        if self.read_only:
            return
        try:
            names = os.listdir(self.run_dir)
        except FileNotFoundError:
            return
        for name in names:
            if is_temp_leftover(self.run_dir / name):
                (self.run_dir / name).unlink(missing_ok=True)

    # -- run state --------------------------------------------------------------------------
    @property
    def _state_path(self) -> Path:
        return self.run_dir / "state.json"

    @property
    def _log_path(self) -> Path:
        return self.run_dir / "state.log"

    def load_state(self) -> RunState | None:
        """The run's state (None before its first commit). Shared and cached: never mutate it;
        change it through ``commit``."""
        for _ in range(3):
            try:
                return self._load_state()
            except FileNotFoundError:
                self._state = None  # a compaction replaced the files under this (unlocked) reader
        return self._load_state()

    def _load_state(self) -> RunState | None:
        try:
            st = os.stat(self._state_path)
        except FileNotFoundError:
            self._state = None
            return None
        ident = (st.st_ino, st.st_size, st.st_mtime_ns)
        try:
            lst: os.stat_result | None = os.stat(self._log_path)
        except FileNotFoundError:
            lst = None
        log_ino = lst.st_ino if lst is not None else None
        log_size = lst.st_size if lst is not None else 0
        if self._state is None or ident != self._state_ident or log_ino != self._log_ino or log_size < self._log_read:
            state = _read(self._state_path, RunState)
            for rec in state.snapshots.values():
                _unwire_record(rec)
            self._state, self._state_ident, self._log_ino = state, ident, log_ino
            self._whole_snaps = len(state.snapshots)
            self._log_read = self._log_valid = 0
            self._log_lines = self._log_stale = 0
        if log_size > self._log_read:
            self._read_log(self._state, log_size)
        return self._state

    def _read_log(self, state: RunState, size: int) -> None:
        """Fold the log lines after ``_log_read`` into ``state`` (see the module doc for a torn tail)."""
        with open(self._log_path, "rb") as f:
            f.seek(self._log_valid)
            data = f.read(size - self._log_valid)
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break  # no newline: an append in progress or torn; not committed
            try:
                rec = StateLogRecord.model_validate_json(data[pos:nl])
            except ValueError as exc:
                if data.find(b"\n", nl + 1) < 0 and not data[nl + 1:].strip(b"\0"):
                    break  # the last line, unparsable: a torn write, never committed
                raise CorruptStoreError(f"cannot read {self._log_path} at byte {self._log_valid + pos}: "
                                        f"{exc}") from None
            pos = nl + 1
            if rec.seq <= state.log_seq:
                self._log_lines += 1
                self._log_stale += 1
                continue  # folded into state.json already (a compaction died before removing the log)
            if rec.seq != state.log_seq + 1:
                raise CorruptStoreError(f"{self._log_path}: record {rec.seq} follows {state.log_seq}")
            if rec.snapshot is not None:
                _unwire_record(rec.snapshot)
            state.apply(rec)
            self._log_lines += 1
        self._log_valid += pos
        self._log_read = size

    def commit(self, rec: StateLogRecord, workspace: str) -> RunState:
        """Durably apply one change to the run's state (caller holds ``locked()``); returns it.

        The objects and manifest ``rec`` names must be durable already (``objects.flush``).
        ``workspace``: recorded by the run's first commit.
        """
        if self.read_only:  # a programming error: a dry run plans, it never records
            raise RuntimeError(f"run {self.run_id}: a read-only tracker store cannot commit")
        state = self.load_state()
        if state is None:  # the run's first commit: the whole document
            state = RunState(run_id=self.run_id, workspace=workspace)
            rec.seq = 0
            state.apply(rec)
            self._write_whole(state)
            return state
        rec.seq = state.log_seq + 1
        if self._log_lines >= max(_COMPACT_MIN, self._whole_snaps):
            state.apply(rec)
            self._write_whole(state)
            return state
        if self._log_stale and self._log_stale == self._log_lines:
            # a compaction died before removing the log it had folded in: remove it now
            self._log_path.unlink(missing_ok=True)
            self._log_ino, self._log_read, self._log_valid, self._log_lines, self._log_stale = None, 0, 0, 0, 0
        line = _wire_log_record(rec).model_dump_json(exclude_none=True).encode("utf-8") + b"\n"
        created = self._log_ino is None
        fd = os.open(self._log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            if os.fstat(fd).st_size > self._log_valid:
                os.ftruncate(fd, self._log_valid)  # a torn tail of a writer killed mid-append
            # In two writes, so a fault test can SIGKILL between them (a torn line, as a crash
            # mid-write leaves); under the run lock nobody else appends in between.
            half = len(line) // 2
            for part in (line[:half], line[half:]):
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view):]
                kill_point("track-state-append")
            os.fdatasync(fd)
            st = os.fstat(fd)
        except BaseException:
            self._state = None  # the in-memory copy may be ahead of the disk: re-read next time
            raise
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.run_dir)  # the log's directory entry, once
        state.apply(rec)
        self._log_ino, self._log_read, self._log_valid = st.st_ino, st.st_size, st.st_size
        self._log_lines += 1
        return state

    def _write_whole(self, state: RunState) -> None:
        """state.json := ``state`` (atomic, durable), then the log it folds in is removed."""
        try:
            write_model(self._state_path, _wire_state(state))
            self._log_path.unlink(missing_ok=True)
            fsync_dir(self.run_dir)
        except BaseException:
            self._state = None
            raise
        st = os.stat(self._state_path)
        self._state, self._state_ident = state, (st.st_ino, st.st_size, st.st_mtime_ns)
        self._whole_snaps = len(state.snapshots)
        self._log_ino, self._log_read, self._log_valid, self._log_lines, self._log_stale = None, 0, 0, 0, 0

    # -- snapshots --------------------------------------------------------------------------
    @staticmethod
    def snapshot(state: RunState, snap_id: str) -> SnapshotRecord:
        rec = state.snapshots.get(snap_id)
        if rec is None:
            raise UnknownSnapshotError(f"run {state.run_id} has no snapshot {snap_id}")
        return rec

    # -- manifests --------------------------------------------------------------------------
    def put_manifest(self, entries: dict[str, Entry], skipped: dict[str, str], *,
                     entries_json: bytes | None = None) -> str:
        """Store the full state ``entries`` + ``skipped``. ``entries_json``: the JSON of
        ``entries`` in key order, made by the caller (``_fastwalk.rows_and_parts``)."""
        m, data = _stored_manifest(entries, skipped, entries_json, ids=self.objects.ids)
        digest = self.objects.put(data, digest_of(data))
        self._remember(digest, m)
        return digest

    def put_delta(self, base: str, base_depth: int, entries: dict[str, Entry], skipped: dict[str, str],
                  removed: list[str], full: Manifest | None) -> str:
        """Store the change against ``base``; ``full`` (the resulting state) is kept in memory
        (None: the caller does not hold it; a reader applies the delta)."""
        _m, data = _stored_manifest(entries, skipped, None, base=base, removed=sorted(removed), depth=base_depth + 1,
                                    ids=self.objects.ids)
        digest = self.objects.put(data, digest_of(data))
        if full is not None:
            self._remember(digest, full)
        self._depths[digest] = base_depth + 1
        return digest

    def depth_of(self, digest: str) -> int:
        """How many deltas lie under manifest ``digest`` (0: a full one). A manifest this process
        does not hold is not parsed for it: ``depth`` is the field before ``ids``, at its tail."""
        if digest not in self._depths and digest not in self._manifests:
            found = _DEPTH_TAIL.search(self._tail(digest))
            if found is not None:
                self._depths[digest] = int(found.group(1))
        if digest not in self._depths:
            self.read_manifest(digest)
        return self._depths.get(digest, 0)

    def _tail(self, digest: str) -> bytes:
        """The last bytes of the stored document ``digest`` (empty when it is not a file here)."""
        path = self.objects.locate(digest)
        if path is None:
            return b""
        try:
            with open(path, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 64))
                return f.read()
        except OSError:
            return b""

    def read_manifest(self, digest: str) -> Manifest:
        """The full state a manifest records (deltas applied onto their base)."""
        m = self._manifests.get(digest)
        if m is not None:
            self._manifests.move_to_end(digest)
            return m
        try:
            raw = _unwire_manifest(Manifest.model_validate_json(self.objects.read(digest)))
        except ValueError as exc:
            raise CorruptStoreError(f"manifest {digest} is unreadable: {exc}") from None
        self._depths[digest] = raw.depth
        if raw.base is None:
            m = raw
        else:
            m = apply_delta(self.read_manifest(raw.base), raw)
        self._remember(digest, m)
        return m

    def read_manifest_once(self, digest: str) -> Manifest:
        """``read_manifest`` for a caller that reads a state once, by path, and never compares
        its entries with tuples (a restore in a new process: issue 13 point 3). A manifest of
        the current format is parsed by pydantic_core's JSON parser without model validation
        (``objects.read`` verified its bytes against their name: they are what ``put_manifest``
        or ``put_delta`` wrote), at a fraction of the cost; its entries are lists (tuples where
        a base was already held in memory). A delta is applied onto its base read the same way;
        the last full state so read is kept (``_once``), as the pivot and the last boundary of
        a restore usually share their base. Anything unexpected: ``read_manifest``."""
        m = self._manifests.get(digest)
        if m is not None:
            return m
        if self._once is not None and self._once[0] == digest:
            return self._once[1]
        from pydantic_core import from_json

        try:
            raw = from_json(self.objects.read(digest), cache_strings=False)  # paths are unique: no cache
        except ValueError:
            return self.read_manifest(digest)
        base = raw.get("base") if isinstance(raw, dict) else None
        if (not isinstance(raw, dict) or raw.get("format_version") != Manifest.FORMAT_VERSION
                or raw.get("ids") not in ("blake3", "git")
                or not isinstance(raw.get("entries"), dict) or not isinstance(raw.get("skipped"), dict)
                or not (base is None or (isinstance(base, str) and isinstance(raw.get("removed"), list)
                                         and isinstance(raw.get("depth"), int)))):
            return self.read_manifest(digest)
        own = _unwire_manifest(Manifest.model_construct(
            format_version=Manifest.FORMAT_VERSION, entries=raw["entries"], skipped=raw["skipped"],
            removed=raw.get("removed") or [], ids=raw["ids"]))
        if base is None:
            self._depths[digest] = 0
            m = own
        else:
            self._depths[digest] = raw["depth"]
            m = apply_delta(self.read_manifest_once(base), own)
        self._once = (digest, m)
        return m

    def read_manifest_paths(self, digest: str, paths: Iterable[str]) -> tuple[Manifest, int]:
        """The state manifest ``digest`` records for ``paths`` alone, and how many entries its
        full state has: a restore plans from its scope, so its cost follows the scope, not the
        tree (issue 30 point 4). The result's ``entries`` hold only those of ``paths`` and of
        every ignore-rule file (``ignore.RULE_FILES``: a rewind checks them all), as lists
        where read from disk; ``skipped`` is whole (it is small). Read and verified once, then
        ``_fastwalk.pick_entries`` finds those entries in one pass over the JSON without an
        object per entry; a delta is applied onto its base read the same way. Without the
        extension, or for a document it does not take, the document is parsed in full."""
        wanted = paths if isinstance(paths, (set, frozenset)) else set(paths)
        held = self._manifests.get(digest)
        if held is None and self._once is not None and self._once[0] == digest:
            held = self._once[1]
        if held is not None:
            return _restricted(held, wanted), len(held.entries)
        # the process's last picks, shared by the trackers of one rewind (its object check and
        # its plan each open one): a manifest is read once (content-addressed: never stale
        # while no gc swept, which the key's generation tells)
        key = (self.objects.root, self.objects.generation, digest)
        known = _PICKED.get(key)
        if known is not None and wanted <= known[0]:
            _PICKED.move_to_end(key)
            return _restricted(known[1], wanted), known[2]
        got_m, got_n = self._pick(digest, wanted)
        _PICKED[key] = (frozenset(wanted), got_m, got_n)
        while len(_PICKED) > _PICKED_MAX:
            _PICKED.popitem(last=False)
        return _restricted(got_m, wanted), got_n

    def _pick(self, digest: str, wanted: set[str] | frozenset[str]) -> tuple[Manifest, int]:
        """``read_manifest_paths`` of a manifest this process does not hold."""
        from pydantic_core import from_json

        data = self.objects.read(digest)
        picked = FAST.pick_entries(data, wanted, _RULE_NAMES) if FAST is not None else None
        try:
            if picked is not None:
                got, count, start, end = picked
                raw = from_json(b"".join((data[:start], b"{}", data[end:])))
                if isinstance(raw, dict):
                    raw["entries"] = {p: from_json(v) for p, v in got.items()}
            else:  # the Python twin: the whole document
                raw = from_json(data, cache_strings=False)
                if isinstance(raw, dict) and isinstance(raw.get("entries"), dict):
                    count = len(raw["entries"])
                    raw["entries"] = {p: e for p, e in raw["entries"].items()
                                      if p in wanted or p.rsplit("/", 1)[-1] in _RULE_SET
                                      or from_wire(p) in wanted}
        except ValueError:
            raw = None
        base = raw.get("base") if isinstance(raw, dict) else None
        if (not isinstance(raw, dict) or raw.get("format_version") != Manifest.FORMAT_VERSION
                or raw.get("ids") not in ("blake3", "git") or not isinstance(raw.get("skipped"), dict)
                or not all(isinstance(e, list) and len(e) == 4 for e in raw["entries"].values())
                or not (base is None or (isinstance(base, str) and isinstance(raw.get("removed"), list)
                                         and isinstance(raw.get("depth"), int)))):
            full = self.read_manifest(digest)  # an older format, or not what the writers write
            return _restricted(full, wanted), len(full.entries)
        own = _unwire_manifest(Manifest.model_construct(
            format_version=Manifest.FORMAT_VERSION, entries=raw["entries"], skipped=raw["skipped"],
            removed=raw.get("removed") or [], ids=raw["ids"]))
        if base is None:
            self._depths[digest] = 0
            return own, count
        self._depths[digest] = raw["depth"]
        touched = set(own.entries) | set(own.skipped) | set(own.removed)
        under, base_count = self.read_manifest_paths(base, wanted | touched)
        total = base_count - sum(1 for p in touched if p in under.entries) + len(own.entries)
        return apply_delta(under, own), total

    def manifest_ids(self, digest: str) -> str:
        """``read_manifest(digest).ids`` without parsing a manifest this process does not hold:
        ``ids`` is the document's last field, so its tail names it (a 100,000-entry manifest is
        not parsed for one word when a new process resumes a run)."""
        m = self._manifests.get(digest)
        if m is not None:
            return m.ids
        found = _IDS_TAIL.search(self._tail(digest))
        if found is not None:
            return found.group(1).decode()
        return self.read_manifest(digest).ids  # an older format, or not where expected: parse it

    def cached_manifest(self, digest: str) -> Manifest | None:
        """The full state of ``digest`` if this process holds it in memory (never reads)."""
        return self._manifests.get(digest)

    def _remember(self, digest: str, m: Manifest) -> None:
        self._manifests[digest] = m
        while len(self._manifests) > _MANIFEST_CACHE_SIZE:
            self._manifests.popitem(last=False)

    # -- stat cache -------------------------------------------------------------------------
    def load_cache(self) -> StatCacheDoc:
        """The stat cache, or an empty one when missing, unreadable or of another format.

        Parsed with the json module and checked row by row by shape, not through pydantic: a
        100,000-row cache is loaded by every new process before its first walk (a resume, a
        rewind's bank), and full model validation cost several times the parse itself.
        """
        path = self.run_dir / "statcache.json"
        try:
            raw = json.loads(path.read_bytes())
            if raw.get("format_version") not in (2, 3, StatCacheDoc.FORMAT_VERSION):
                raise ValueError("another format")  # version 1 hashed rows another way: cold
            rows: dict[str, CacheRow] = {}
            for p, (key, h, trusted, target) in raw["rows"].items():
                k = tuple(key)
                if len(k) != 5 or not isinstance(h, str) or not isinstance(trusted, bool):
                    raise ValueError("bad row")
                rows[p] = (k, h, trusted, target)  # type: ignore[assignment]
            manifest, size_cap = raw.get("manifest"), raw.get("size_cap", 0)
            ids = raw.get("ids", "blake3")  # the kind of content ids its rows hold (workspacetrack.gitsource)
            index, total = raw.get("index"), raw.get("total", 0)  # version 3 (absent in 2)
            dirs, dirs_manifest = raw.get("dirs", {}), raw.get("dirs_manifest")  # version 4
            if not isinstance(dirs, dict) or not all(type(v) is str for v in dirs.values()) \
                    or not (dirs_manifest is None or isinstance(dirs_manifest, str)):
                raise ValueError("bad directory fingerprints")
            if not (manifest is None or isinstance(manifest, str)) or not isinstance(size_cap, int) \
                    or ids not in ("blake3", "git") or not (index is None or isinstance(index, str)) \
                    or not isinstance(total, int):
                raise ValueError("bad header")
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            return StatCacheDoc()  # a cache: unreadable means cold, never an error
        doc = StatCacheDoc.model_construct(format_version=StatCacheDoc.FORMAT_VERSION, manifest=manifest,
                                           size_cap=size_cap, ids=ids, rows=_rows_from_wire(rows),
                                           index=index, total=total, dirs=keys_from_wire(dirs),
                                           dirs_manifest=dirs_manifest if dirs else None)
        return doc

    def save_cache(self, doc: StatCacheDoc) -> None:
        # A cache: atomic (never torn) but not fsynced; a lost or unreadable one means a cold walk.
        if self.read_only:
            return
        wire = _rows_to_wire(doc.rows)
        if wire is not doc.rows:
            doc = doc.model_copy(update={"rows": wire})
        if not all_clean(doc.dirs):
            doc = doc.model_copy(update={"dirs": {to_wire(d): fp for d, fp in doc.dirs.items()}})
        data = doc.model_dump_json().encode("utf-8")
        path = self.run_dir / "statcache.json"
        # Shared by content: runs over the same unchanged tree write the same cache bytes, and
        # a 100,000-file cache is ~14 MB. The run's file is a hard link to
        # <objects>/statcache/<blake3 of the bytes> (``iterion gc`` removes an entry once no run
        # links it); where links are impossible the run keeps a private copy.
        shared = self.objects.root / STATCACHE_DIR / digest_of(data)
        try:
            # (under the run's lock and the store's shared gc lock: no sweep in between)
            if not shared.exists():
                atomic_write_bytes(shared, data, mode=0o444, durable=False)
            elif os.path.exists(path) and os.path.samefile(path, shared):
                return
            tmp = self.run_dir / f".statcache.json.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
            os.link(shared, tmp)
            try:
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            return
        except OSError:
            pass
        atomic_write_bytes(path, data, durable=False)


# -- wire form of names (workspacetrack.names): what JSON can carry --------------------------

def _unwire_record(rec: SnapshotRecord) -> None:
    if any(t[:1] == "\x00" for t in rec.touched):
        rec.touched = list_from_wire(rec.touched)
    if rec.changed is not None and any(t[:1] == "\x00" for t in rec.changed):
        rec.changed = list_from_wire(rec.changed)


def _wire_record(rec: SnapshotRecord) -> SnapshotRecord:
    update: dict[str, list[str]] = {}
    if not all(is_clean(t) for t in rec.touched):
        update["touched"] = list_to_wire(rec.touched)
    if rec.changed is not None and not all(t.isascii() or is_clean(t) for t in rec.changed):
        update["changed"] = list_to_wire(rec.changed)
    return rec.model_copy(update=update) if update else rec


def _wire_state(state: RunState) -> RunState:
    snaps = {k: _wire_record(r) for k, r in state.snapshots.items()}
    if all(snaps[k] is r for k, r in state.snapshots.items()):
        return state
    return state.model_copy(update={"snapshots": snaps})


def _wire_log_record(rec: StateLogRecord) -> StateLogRecord:
    if rec.snapshot is None:
        return rec
    wired = _wire_record(rec.snapshot)
    return rec if wired is rec.snapshot else rec.model_copy(update={"snapshot": wired})


def _targets(values: Iterable[tuple[object, ...]]) -> Iterator[str]:
    """The symlink targets (item 3, None for other entries/rows), collected at C speed."""
    return filter(None, map(itemgetter(3), values))  # type: ignore[arg-type]


# the two dictionaries of an empty manifest as pydantic writes them (``_stored_manifest``)
_EMPTY_PARTS = b'"entries":{},"skipped":{}'


def _stored_manifest(entries: dict[str, Entry], skipped: dict[str, str], entries_json: bytes | None,
                     **fields: Any) -> tuple[Manifest, bytes]:
    """The manifest of ``entries`` and ``skipped`` with ``fields`` and the bytes stored for it,
    its dictionaries in key order (so equal states hash equal). The JSON of the dictionaries is
    ``_fastwalk.sorted_json``'s when it is built and they hold plain UTF-8 text, or comes with
    ``entries_json`` (``_fastwalk.rows_and_parts``'s); pydantic writes the rest of the document,
    which is small. Otherwise all of it is pydantic's, names in wire form. Both give the same
    bytes (tests/workspacetrack/test_fastjson.py). The manifest kept in memory holds the caller's
    dicts in whatever order they come: nothing reads an order from it (a delta applied in memory
    appends its new paths too); only the stored bytes are sorted."""
    fast = FAST
    if fast is not None:
        json_e = entries_json if entries_json is not None else fast.sorted_json(entries, True)
        json_s = fast.sorted_json(skipped, False)
        if json_e is not None and json_s is not None:
            m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries, skipped=skipped,
                                         **fields)
            shell = _wire_manifest(m.model_copy(update={"entries": {}, "skipped": {}})).model_dump_json().encode()
            head, mark, tail = shell.partition(_EMPTY_PARTS)
            if mark:
                return m, b"".join((head, b'"entries":', json_e, b',"skipped":', json_s, tail))
    m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=dict(sorted(entries.items())),
                                 skipped=dict(sorted(skipped.items())), **fields)
    return m, _wire_manifest(m).model_dump_json().encode("utf-8")


def _wire_manifest(m: Manifest) -> Manifest:
    """``m`` with non-UTF-8 names and link targets in wire form (``m`` itself if it has none)."""
    entries, skipped, removed = m.entries, m.skipped, m.removed
    if not (all_clean(entries) and all_clean(_targets(entries.values()))):
        entries = {to_wire(p): (e if e[3] is None else (e[0], e[1], e[2], to_wire(e[3])))
                   for p, e in entries.items()}
    if not all_clean(skipped):
        skipped = {to_wire(p): r for p, r in skipped.items()}
    if not all_clean(removed):
        removed = list_to_wire(removed)
    if entries is m.entries and skipped is m.skipped and removed is m.removed:
        return m
    return m.model_copy(update={"entries": entries, "skipped": skipped, "removed": removed})


def _restricted(m: Manifest, wanted: set[str] | frozenset[str]) -> Manifest:
    """``m`` with the entries of ``wanted`` and of the ignore-rule files alone (``read_manifest_paths``)."""
    entries = {p: m.entries[p] for p in wanted if p in m.entries}
    entries.update((p, e) for p, e in m.entries.items() if p.endswith(RULE_FILES) and p.rsplit("/", 1)[-1] in _RULE_SET)
    return Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries, skipped=m.skipped,
                                    removed=[], ids=m.ids)


def apply_delta(base: Manifest, delta: Manifest) -> Manifest:
    """The full state of ``delta`` (its ``removed``, entries and skips) applied onto ``base``'s;
    ``base`` is left as it was (it may be a cached state)."""
    entries, skipped = dict(base.entries), dict(base.skipped)
    for p in delta.removed:
        entries.pop(p, None)
        skipped.pop(p, None)
    for p, e in delta.entries.items():
        skipped.pop(p, None)
        entries[p] = e
    for p, r in delta.skipped.items():
        entries.pop(p, None)
        skipped[p] = r
    return Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries,
                                    skipped=skipped, removed=[], ids=delta.ids)


def _unwire_manifest(m: Manifest) -> Manifest:
    if any_wire(m.entries) or any_wire(_targets(m.entries.values())):
        m.entries = {from_wire(p): (e if e[3] is None else (e[0], e[1], e[2], from_wire(e[3])))
                     for p, e in m.entries.items()}
    m.skipped = keys_from_wire(m.skipped)
    if any(p[:1] == "\x00" for p in m.removed):
        m.removed = list_from_wire(m.removed)
    return m


def _rows_to_wire(rows: dict[str, CacheRow]) -> dict[str, CacheRow]:
    if all_clean(rows) and all_clean(_targets(rows.values())):
        return rows
    return {to_wire(p): (r if r[3] is None else (r[0], r[1], r[2], to_wire(r[3]))) for p, r in rows.items()}


def _rows_from_wire(rows: dict[str, CacheRow]) -> dict[str, CacheRow]:
    if not (any_wire(rows) or any_wire(_targets(rows.values()))):
        return rows
    return {from_wire(p): (r if r[3] is None else (r[0], r[1], r[2], from_wire(r[3]))) for p, r in rows.items()}
