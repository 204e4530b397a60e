"""Atomic file replacement: temp file in the same directory, fsync, rename, fsync the directory.

A reader therefore sees either the old complete file or the new complete file, never a torn
write, even if the writer is SIGKILLed at any instruction.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: Path) -> None:
    """Make a rename inside ``directory`` durable."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_one(path: str, dir_fd: int | None, directory: bool) -> None:
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError:
        return  # gone since (a later step removed it) or a symlink (its directory's sync holds it)
    try:
        os.fsync(fd)
    except OSError:
        pass  # e.g. EINVAL on a filesystem that cannot sync: nothing more to be done here
    finally:
        os.close(fd)


# fsyncs issued together: the filesystem folds concurrent fsyncs into one journal commit
_SYNC_THREADS = 16


def sync_paths(files: Iterable[str], dirs: Iterable[str] = (), *, dir_fd: int | None = None) -> None:
    """Make exactly ``files`` (their data) and then ``dirs`` (their entries: the names just
    created, renamed or removed in them) durable, and nothing else.

    A batch's fsyncs are issued concurrently, so the filesystem commits them together (the
    cost of about one fsync, not one per file) - unlike ``syncfs``, which would also wait for
    every other process's unflushed writes on the same filesystem. Files come first: a
    directory entry made durable must not name a file whose data is not. Relative paths are
    taken from ``dir_fd`` when given.
    """
    for batch, directory in ((sorted(set(files)), False), (sorted(set(dirs)), True)):
        if len(batch) <= 2:
            for p in batch:
                _fsync_one(p, dir_fd, directory)
            continue
        with ThreadPoolExecutor(max_workers=min(_SYNC_THREADS, len(batch))) as pool:
            list(pool.map(_fsync_one, batch, repeat(dir_fd), repeat(directory)))


def atomic_write_bytes(path: Path | str, data: bytes, *, mode: int = 0o644, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically.

    ``durable=False`` skips the fsyncs (the rename stays atomic, so a killed process still
    leaves old-or-new): for batches whose caller makes them durable once at the end, e.g. a
    capture's content objects before the snapshot that references them is committed.
    """
    path = Path(path)
    # Dot-prefixed temp name so directory listings and globbing for documents skip it.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileNotFoundError:  # create the parent only when missing: saves a syscall per write
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path | str, text: str, *, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def is_temp_leftover(path: Path) -> bool:
    """True for a temp file a killed writer left behind (safe to delete, never a document)."""
    return path.name.startswith(".") and path.name.endswith(TMP_SUFFIX)
