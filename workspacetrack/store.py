"""Where a tracker's state lives on disk, and the order in which a capture commits it.

    <store>/objects/ab/cdef...          content-addressed blobs and manifests, shared by all runs
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
from workspacetrack.models import Entry, Manifest, RunState, SnapshotRecord, StatCacheDoc
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


class TrackStore:
    def __init__(self, root: Path, run_id: str) -> None:
        validate_id(run_id, "run id")
        self.root = root
        self.run_id = run_id
        self.objects = ObjectStore(root / "objects")
        self.run_dir = root / "runs" / run_id
        self._manifests: OrderedDict[str, Manifest] = OrderedDict()  # digest -> full state
        self._depths: dict[str, int] = {}

    # -- locking ----------------------------------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[None]:
        with file_lock(self.run_dir / "lock"):
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
        return _read(path, RunState)

    def save_state(self, state: RunState) -> None:
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
        m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries, skipped=skipped)
        data = m.model_dump_json().encode("utf-8")
        digest = self.objects.put(data, digest_of(data))
        self._remember(digest, m)
        return digest

    def put_delta(self, base: str, base_depth: int, entries: dict[str, Entry], skipped: dict[str, str],
                  removed: list[str], full: Manifest) -> str:
        """Store the change against ``base``; ``full`` (the resulting state) is kept in memory."""
        m = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=dict(sorted(entries.items())),
                                     skipped=dict(sorted(skipped.items())), base=base,
                                     removed=sorted(removed), depth=base_depth + 1)
        data = m.model_dump_json().encode("utf-8")
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
            raw = Manifest.model_validate_json(self.objects.read(digest))
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
                                         skipped=skipped, removed=[])
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
            return read_model(path, StatCacheDoc)
        except (FileNotFoundError, ValueError):
            return StatCacheDoc()  # a cache: unreadable means cold, never an error

    def save_cache(self, doc: StatCacheDoc) -> None:
        # A cache: atomic (never torn) but not fsynced; a lost or unreadable one means a cold walk.
        data = doc.model_dump_json().encode("utf-8")
        atomic_write_bytes(self.run_dir / "statcache.json", data, durable=False)
