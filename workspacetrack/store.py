"""Where a tracker's state lives on disk, and the order in which a capture commits it.

    <objects>/ab/cdef...                content-addressed blobs and manifests, shared by all runs
                                        (``shared_objects_dir``)
    <store>/runs/<run>/state.json       snapshot records, chain, label map, banks (the commit point)
    <store>/runs/<run>/statcache.json   path -> stat -> hash (a cache: losing it costs re-hashing)
    <store>/runs/<run>/lock             flock: one capture or restore of a run at a time

Commit order: objects and manifest (flushed once) -> state.json. A process
killed at any point leaves state.json naming the previous head, whose objects are all durable;
what it wrote before dying is unreferenced and harmless.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from gitrefs.ids import validate_id
from persist import VersionedModel, atomic_write_bytes, file_lock, read_model, write_model
from persist.atomic import is_temp_leftover
from workspacetrack.errors import CorruptStoreError, UnknownSnapshotError
from workspacetrack.models import CacheRow, Entry, Manifest, RunState, SnapshotRecord, StatCacheDoc
from workspacetrack.names import from_wire, is_clean, keys_from_wire, list_from_wire, list_to_wire, to_wire
from workspacetrack.objects import ObjectStore, digest_of

_MANIFEST_CACHE_SIZE = 6

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
    def __init__(self, root: Path, run_id: str) -> None:
        validate_id(run_id, "run id")
        self.root = root
        self.run_id = run_id
        shared = shared_objects_dir(root, run_id)
        # a run recorded before the move keeps reading its own per-run objects
        legacy = (root / "objects",) if shared != root / "objects" else ()
        self.objects = ObjectStore(shared, legacy)
        self.run_dir = root / "runs" / run_id
        self._manifests: OrderedDict[str, Manifest] = OrderedDict()  # digest -> full state
        self._depths: dict[str, int] = {}
        self._epoch = 0

    # -- locking ----------------------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[None]:
        with file_lock(self.run_dir / "lock"), self.objects.shared():
            if self.objects.epoch != self._epoch:  # a gc swept: cached manifests may name gone objects
                self._epoch = self.objects.epoch
                self._manifests.clear()
            self._clean_leftovers()
            yield

    def _clean_leftovers(self) -> None:
        """Temp files of a writer killed mid-write (never documents; objects dirs are left alone)."""
        try:
            names = os.listdir(self.run_dir)
        except FileNotFoundError:
            return
        for name in names:
            if is_temp_leftover(self.run_dir / name):
                (self.run_dir / name).unlink(missing_ok=True)

    # -- run state --------------------------------------------------------------------------
    def load_state(self) -> RunState | None:
        path = self.run_dir / "state.json"
        if not path.exists():
            return None
        state = _read(path, RunState)
        for rec in state.snapshots.values():
            if any(t[:1] == "\x00" for t in rec.touched):
                rec.touched = list_from_wire(rec.touched)
        return state

    def save_state(self, state: RunState) -> None:
        if any(not is_clean(t) for rec in state.snapshots.values() for t in rec.touched):
            snaps = {k: rec.model_copy(update={"touched": list_to_wire(rec.touched)})
                     for k, rec in state.snapshots.items()}
            state = state.model_copy(update={"snapshots": snaps})
        write_model(self.run_dir / "state.json", state)

    # -- snapshots --------------------------------------------------------------------------
    @staticmethod
    def snapshot(state: RunState, snap_id: str) -> SnapshotRecord:
        rec = state.snapshots.get(snap_id)
        if rec is None:
            raise UnknownSnapshotError(f"run {state.run_id} has no snapshot {snap_id}")
        return rec

    # -- manifests --------------------------------------------------------------------------
    def put_manifest(self, entries: dict[str, Entry], skipped: dict[str, str], *, presorted: bool = False) -> str:
        # Built from our own walk: skip re-validating 20,000 rows; sorted so equal states hash equal.
        if not presorted:
            entries, skipped = dict(sorted(entries.items())), dict(sorted(skipped.items()))
        m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries, skipped=skipped,
                                     ids=self.objects.ids)
        data = _wire_manifest(m).model_dump_json().encode("utf-8")
        digest = self.objects.put(data, digest_of(data))
        self._remember(digest, m)
        return digest

    def put_delta(self, base: str, base_depth: int, entries: dict[str, Entry], skipped: dict[str, str],
                  removed: list[str], full: Manifest) -> str:
        """Store the change against ``base``; ``full`` (the resulting state) is kept in memory."""
        m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=dict(sorted(entries.items())),
                                     skipped=dict(sorted(skipped.items())), base=base,
                                     removed=sorted(removed), depth=base_depth + 1, ids=self.objects.ids)
        data = _wire_manifest(m).model_dump_json().encode("utf-8")
        digest = self.objects.put(data, digest_of(data))
        self._remember(digest, full)
        self._depths[digest] = base_depth + 1
        return digest

    def depth_of(self, digest: str) -> int:
        if digest not in self._depths:
            self.read_manifest(digest)
        return self._depths.get(digest, 0)

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
            base = self.read_manifest(raw.base)
            entries, skipped = dict(base.entries), dict(base.skipped)
            for p in raw.removed:
                entries.pop(p, None)
                skipped.pop(p, None)
            for p, e in raw.entries.items():
                skipped.pop(p, None)
                entries[p] = e
            for p, r in raw.skipped.items():
                entries.pop(p, None)
                skipped[p] = r
            m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries,
                                         skipped=skipped, removed=[], ids=raw.ids)
        self._remember(digest, m)
        return m

    def _remember(self, digest: str, m: Manifest) -> None:
        self._manifests[digest] = m
        while len(self._manifests) > _MANIFEST_CACHE_SIZE:
            self._manifests.popitem(last=False)

    # -- stat cache -------------------------------------------------------------------------
    def load_cache(self) -> StatCacheDoc:
        path = self.run_dir / "statcache.json"
        try:
            doc = read_model(path, StatCacheDoc)
        except (FileNotFoundError, ValueError):
            return StatCacheDoc()  # a cache: unreadable means cold, never an error
        doc.rows = _rows_from_wire(doc.rows)
        return doc

    def save_cache(self, doc: StatCacheDoc) -> None:
        # A cache: atomic (never torn) but not fsynced; a lost or unreadable one means a cold walk.
        wire = _rows_to_wire(doc.rows)
        if wire is not doc.rows:
            doc = doc.model_copy(update={"rows": wire})
        data = doc.model_dump_json().encode("utf-8")
        atomic_write_bytes(self.run_dir / "statcache.json", data, durable=False)


# -- wire form of names (workspacetrack.names): what JSON can carry --------------------------

def _entry_clean(path: str, e: Entry) -> bool:
    return (path.isascii() or is_clean(path)) and (e[3] is None or e[3].isascii() or is_clean(e[3]))


def _wire_manifest(m: Manifest) -> Manifest:
    """``m`` with non-UTF-8 names and link targets in wire form (``m`` itself if it has none)."""
    entries, skipped, removed = m.entries, m.skipped, m.removed
    if not all(_entry_clean(p, e) for p, e in entries.items()):
        entries = {to_wire(p): (e if e[3] is None else (e[0], e[1], e[2], to_wire(e[3])))
                   for p, e in entries.items()}
    if not all(p.isascii() or is_clean(p) for p in skipped):
        skipped = {to_wire(p): r for p, r in skipped.items()}
    if not all(p.isascii() or is_clean(p) for p in removed):
        removed = list_to_wire(removed)
    if entries is m.entries and skipped is m.skipped and removed is m.removed:
        return m
    return m.model_copy(update={"entries": entries, "skipped": skipped, "removed": removed})


def _unwire_manifest(m: Manifest) -> Manifest:
    if any(p[:1] == "\x00" or (e[3] is not None and e[3][:1] == "\x00") for p, e in m.entries.items()):
        m.entries = {from_wire(p): (e if e[3] is None else (e[0], e[1], e[2], from_wire(e[3])))
                     for p, e in m.entries.items()}
    m.skipped = keys_from_wire(m.skipped)
    if any(p[:1] == "\x00" for p in m.removed):
        m.removed = list_from_wire(m.removed)
    return m


def _rows_to_wire(rows: dict[str, CacheRow]) -> dict[str, CacheRow]:
    if all((p.isascii() or is_clean(p)) and (r[3] is None or is_clean(r[3])) for p, r in rows.items()):
        return rows
    return {to_wire(p): (r if r[3] is None else (r[0], r[1], r[2], to_wire(r[3]))) for p, r in rows.items()}


def _rows_from_wire(rows: dict[str, CacheRow]) -> dict[str, CacheRow]:
    if not any(p[:1] == "\x00" or (r[3] is not None and r[3][:1] == "\x00") for p, r in rows.items()):
        return rows
    return {from_wire(p): (r if r[3] is None else (r[0], r[1], r[2], from_wire(r[3]))) for p, r in rows.items()}
