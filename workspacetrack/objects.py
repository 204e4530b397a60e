"""Content-addressed object store: blake3-named files shared by every run of one store.

An object's name is the hash of its bytes, so a write is idempotent and deduplicates across
captures and runs. Objects of one capture are written without per-file fsync and made durable
together by ``flush`` before anything that references them is committed: exactly the files and
directories written since the last flush (``persist.sync_paths``), never the whole filesystem.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import blake3

from persist import atomic_write_bytes, sync_paths
from workspacetrack.bigfiles import copy_sparse, hasher
from workspacetrack.errors import CorruptStoreError, UnknownSnapshotError

_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def digest_of(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


class ObjectStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_str = str(root)
        self._pending: list[str] = []  # object files written since the last flush
        self._known: set[str] = set()

    def path_for(self, digest: str) -> Path:
        if not _DIGEST.match(digest):
            raise UnknownSnapshotError(f"{digest!r} is not an object id (64 lowercase hex digits)")
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return digest in self._known or self.path_for(digest).exists()

    def put(self, data: bytes, digest: str | None = None) -> str:
        digest = digest or digest_of(data)
        if digest in self._known:
            return digest
        path = f"{self._root_str}/{digest[:2]}/{digest[2:]}"
        if not os.path.exists(path):
            atomic_write_bytes(path, data, mode=0o444, durable=False)
            self._pending.append(path)
        self._known.add(digest)
        return digest

    def put_stream(self, fd: int, size: int) -> tuple[str, int]:
        """Store the content of open file ``fd`` (``size`` bytes, from offset 0) streamed and
        sparse; returns (digest, bytes stored). Never holds the content in memory."""
        os.makedirs(self._root_str, exist_ok=True)
        tmp = f"{self._root_str}/.stream.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        try:
            h = hasher()
            try:
                done = copy_sparse(fd, out, size, h)
            finally:
                os.close(out)
            digest = h.hexdigest()
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

    def copy_to(self, digest: str, dst: int) -> None:
        """Write object ``digest`` into open file ``dst`` (streamed, holes kept), verifying its
        content against its name; CorruptStoreError (dst left partial) when it does not match."""
        path = self.path_for(digest)
        try:
            src = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise UnknownSnapshotError(f"object {digest} is not in the store") from None
        try:
            h = hasher()
            copy_sparse(src, dst, os.fstat(src).st_size, h)
        finally:
            os.close(src)
        if h.hexdigest() != digest:
            raise CorruptStoreError(f"object {digest} is corrupt (content does not match its name)",
                                    hint=f"delete {path} and capture again")

    def read(self, digest: str) -> bytes:
        path = self.path_for(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise UnknownSnapshotError(f"object {digest} is not in the store") from None
        if digest_of(data) != digest:
            raise CorruptStoreError(f"object {digest} is corrupt (content does not match its name)",
                                    hint=f"delete {path} and capture again")
        return data

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
