"""Content-addressed object store: hash-named files shared by every run of one iterion store.

An object's name is the hash of its bytes (blake3, or git's blob id for runs whose workspace is
in a git repository: ``workspacetrack.gitsource``), so a write is idempotent and deduplicates
across captures and runs. Objects of one capture are written without per-file fsync and made
durable together by ``flush`` before anything that references them is committed: exactly the
files and directories written since the last flush (``gitrefs.persist.sync_paths``), never the whole
filesystem.

Garbage collection (``iterion.store.gc``) deletes objects no kept run references. It holds
``.gc.lock`` exclusively; every capture and restore holds it shared (``TrackStore.locked``), so
no object is looked up, deduplicated against or referenced while a sweep runs. A sweep bumps
``.gc-generation``; a process that sees it changed forgets every object it believed present
(``epoch``), so no in-memory belief outlives a sweep.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import blake3

from gitrefs.persist import atomic_write_bytes, sync_paths
from workspacetrack.bigfiles import copy_sparse, hasher
from workspacetrack.errors import CorruptStoreError, UnknownSnapshotError
from workspacetrack.gitsource import GitSource, blob_hasher, blob_id, is_blob_id

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_DIGEST_OR_BLOB = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")  # (``path_for``'s two kinds in one)


def digest_of(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


GC_LOCK = ".gc.lock"          # shared by every capture/restore, exclusive for ``iterion gc``
GC_GENERATION = ".gc-generation"  # bumped by every gc sweep: in-memory knowledge is stale after one


class ObjectStore:
    """Content objects (blake3- or git-blob-named) and the tracker's own documents (blake3).

    ``legacy`` directories are read (never written): the per-run object stores of runs recorded
    before objects moved to one store per iterion store. ``git`` (set for a workspace inside a
    git repository) answers for blobs git already has; ``ids`` is the content-id kind of the
    capture in progress ("blake3" or "git", see ``workspacetrack.gitsource``).
    """

    def __init__(self, root: Path, legacy: tuple[Path, ...] = ()) -> None:
        self.root = root
        self._root_str = str(root)
        self.legacy = legacy
        # every directory an object may be in, as strings: ``_locate`` is called per path of a
        # restore's scope (hundreds per rewind plan), where pathlib cost more than the stat
        self._dirs = (self._root_str, *map(str, legacy))
        self._pending: list[str] = []  # object files written since the last flush
        self._known: set[str] = set()
        self._in_git: set[str] = set()
        self._git: GitSource | None = None
        self._git_opener: Callable[[], GitSource | None] | None = None
        self.ids = "blake3"
        self.epoch = 0  # in-process count of gc sweeps seen (``check_generation``)
        self._generation: bytes | None = None

    def attach_git(self, opener: Callable[[], GitSource | None]) -> None:
        """How to reach the workspace's repository; opened on first need (pygit2 is heavy)."""
        self._git_opener = opener

    @property
    def git(self) -> GitSource | None:
        if self._git_opener is not None:
            opener, self._git_opener = self._git_opener, None
            self._git = opener()
        return self._git

    # -- gc interplay ------------------------------------------------------------------------
    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the store's gc lock shared: no sweep runs while objects are looked up, written
        and committed (a sweep takes it exclusively)."""
        os.makedirs(self._root_str, exist_ok=True)
        fd = os.open(os.path.join(self._root_str, GC_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self.check_generation()
            yield
        finally:
            os.close(fd)

    @property
    def generation(self) -> bytes | None:
        """The gc generation this process last saw (changes with every sweep)."""
        return self._generation

    def check_generation(self) -> None:
        """After a sweep, forget what this process believed present (it may be gone)."""
        try:
            with open(os.path.join(self._root_str, GC_GENERATION), "rb") as f:
                gen: bytes | None = f.read()
        except OSError:
            gen = None
        if gen != self._generation:
            if self._generation is not None or gen is not None:
                self._known.clear()
                self._in_git.clear()
                self.epoch += 1
            self._generation = gen

    # -- where an object is --------------------------------------------------------------------
    def path_for(self, digest: str) -> Path:
        if not (_DIGEST.match(digest) or is_blob_id(digest)):
            raise UnknownSnapshotError(f"{digest!r} is not an object id (64 or 40 lowercase hex digits)")
        return self.root / digest[:2] / digest[2:]

    def locate(self, digest: str) -> Path | None:
        """The file holding object ``digest`` in this store (or a legacy one); None when it is
        not stored here (a git blob recorded by reference lives in git's object database)."""
        return self._locate(digest)

    def _locate(self, digest: str) -> Path | None:
        if not (len(digest) in (40, 64) and _DIGEST_OR_BLOB.match(digest)):
            self.path_for(digest)  # a malformed id is named as such
        tail = f"/{digest[:2]}/{digest[2:]}"
        for d in self._dirs:
            if os.path.exists(d + tail):
                return Path(d + tail)
        return None

    def has(self, digest: str) -> bool:
        if digest in self._known or digest in self._in_git or self._locate(digest) is not None:
            return True
        return self.git is not None and is_blob_id(digest) and self.git.has(digest)

    # -- writing ---------------------------------------------------------------------------------
    def put(self, data: bytes, digest: str | None = None) -> str:
        """Store ``data`` under its blake3 (the tracker's own documents, blake3 content)."""
        digest = digest or digest_of(data)
        if digest in self._known:
            return digest
        path = f"{self._root_str}/{digest[:2]}/{digest[2:]}"
        if not os.path.exists(path):
            atomic_write_bytes(path, data, mode=0o444, durable=False)
            self._pending.append(path)
        self._known.add(digest)
        return digest

    def put_content(self, data: bytes) -> str:
        """Record file (or link target) content: its id in the current ``ids`` kind. Git kind:
        a blob git has is referenced (and pinned at the capture's seal), never copied."""
        if self.ids != "git":
            return self.put(data, digest_of(data))
        oid = blob_id(data)
        if oid in self._known or oid in self._in_git:
            return oid
        if self.git is not None and self.git.has(oid):
            self.git.referenced(oid)
            self._in_git.add(oid)
            return oid
        return self.put(data, oid)

    def put_stream(self, fd: int, size: int) -> tuple[str, int]:
        """Store the content of open file ``fd`` (``size`` bytes, from offset 0) streamed and
        sparse; returns (id, bytes read). Never holds the content in memory."""
        if self.ids == "git":
            h = blob_hasher(size)
            if copy_sparse(fd, None, size, h) == size:
                oid = h.hexdigest()
                if oid in self._known or oid in self._in_git:
                    return oid, size
                if self.git is not None and self.git.has(oid):
                    self.git.referenced(oid)
                    self._in_git.add(oid)
                    return oid, size
        os.makedirs(self._root_str, exist_ok=True)
        tmp = f"{self._root_str}/.stream.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        out = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        try:
            try:
                if self.ids == "git":
                    # the header needs the length: hash the copy, whatever the file did meanwhile
                    done = copy_sparse(fd, out, size, None)
                    hg = blob_hasher(done)
                    copy_sparse(out, None, done, hg)
                    digest = hg.hexdigest()
                else:
                    h3 = hasher()
                    done = copy_sparse(fd, out, size, h3)
                    digest = h3.hexdigest()
            finally:
                os.close(out)
            path = f"{self._root_str}/{digest[:2]}/{digest[2:]}"
            if digest in self._known or os.path.exists(path):
                os.unlink(tmp)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.replace(tmp, path)
                self._pending.append(path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._known.add(digest)
        return digest, done

    # -- reading ---------------------------------------------------------------------------------
    def copy_to(self, digest: str, dst: int) -> None:
        """Write object ``digest`` into open file ``dst`` (streamed, holes kept), verifying its
        content against its name; CorruptStoreError (dst left partial) when it does not match."""
        path = self._locate(digest)
        if path is None:
            data = self._from_git(digest)
            view = memoryview(data)
            at = 0
            while view:
                n = os.pwrite(dst, view, at)
                view, at = view[n:], at + n
            os.ftruncate(dst, len(data))
            return
        src = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(src).st_size
            h = blob_hasher(size) if is_blob_id(digest) else hasher()
            copy_sparse(src, dst, size, h)
        finally:
            os.close(src)
        if h.hexdigest() != digest:
            raise CorruptStoreError(f"object {digest} is corrupt (content does not match its name)",
                                    hint=f"delete {path} and capture again")

    def read(self, digest: str) -> bytes:
        path = self._locate(digest)
        if path is None:
            return self._from_git(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise UnknownSnapshotError(f"object {digest} is not in the store") from None
        if (blob_id(data) if is_blob_id(digest) else digest_of(data)) != digest:
            raise CorruptStoreError(f"object {digest} is corrupt (content does not match its name)",
                                    hint=f"delete {path} and capture again")
        return data

    def _from_git(self, digest: str) -> bytes:
        """A blob recorded by reference: its bytes from git's object database (libgit2 checks
        the id on read)."""
        if self.git is not None and is_blob_id(digest):
            data = self.git.read(digest)
            if data is not None:
                return data
            raise UnknownSnapshotError(f"git blob {digest} is in neither the snapshot store nor "
                                       f"the repository {self.git.workdir}")
        self.path_for(digest)  # a malformed id is named as such
        raise UnknownSnapshotError(f"object {digest} is not in the store")

    def flush(self) -> None:
        """Make every object written since the last flush durable: each object file's data,
        then the fan-out directories naming them, then the root (which names a fan-out
        directory created meanwhile). Nothing references these objects before this returns
        (the caller commits its snapshot after), so a crash at any point leaves at worst an
        unreferenced or, on a filesystem that does not order data before names, an empty or
        partial object file (``read``/``copy_to`` verify content against the name); the run's
        state never names an object that was not durable here first."""
        if self._pending:
            files = self._pending
            self._pending = []
            sync_paths(files, [*{os.path.dirname(f) for f in files}, self._root_str])

    def seal(self) -> None:
        """Pin every git blob the capture in progress referenced (before anything names it)."""
        if self._git is not None:
            self._git.seal()
