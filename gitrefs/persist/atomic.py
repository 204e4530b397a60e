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
from typing import Any

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
# "fsync": one fsync per file and per directory, for filesystems that do not journal metadata
# in order (the default "batch" relies on that, as git's core.fsyncMethod=batch does)
FSYNC_METHOD_ENV = "ITERION_FSYNC_METHOD"
_SFR_WRITE, _SFR_WAIT_ALL = 2, 7  # SYNC_FILE_RANGE_WRITE; WAIT_BEFORE | WRITE | WAIT_AFTER
_libc: Any = None


def _sync_file_range() -> Any:
    """libc's sync_file_range (Linux), or None."""
    global _libc
    if _libc is None:
        try:
            import ctypes

            lib = ctypes.CDLL(None, use_errno=True)
            fn = lib.sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            _libc = fn
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


def _fsync_each(paths: list[str], dir_fd: int | None, directory: bool) -> None:
    if len(paths) <= 2:
        for p in paths:
            _fsync_one(p, dir_fd, directory)
        return
    with ThreadPoolExecutor(max_workers=min(_SYNC_THREADS, len(paths))) as pool:
        list(pool.map(_fsync_one, paths, repeat(dir_fd), repeat(directory)))


def _write_out(paths: list[str], dir_fd: int | None, sfr: Any) -> bool:
    """Write the files' dirty pages to the device and wait (no metadata, no cache flush):
    all started first, then all waited for, so the device sees one batch. False: not possible."""
    fds: list[int] = []
    try:
        for p in paths:
            try:
                fds.append(os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd))
            except OSError:
                continue  # gone since, or a symlink: nothing of its data to write
        for flags in (_SFR_WRITE, _SFR_WAIT_ALL):
            for fd in fds:
                if sfr(fd, 0, 0, flags) != 0:
                    return False
        return True
    finally:
        for fd in fds:
            os.close(fd)


def sync_paths(files: Iterable[str], dirs: Iterable[str] = (), *, dir_fd: int | None = None,
               dummy_prefix: str = ".iterion-sync", journal_dir: str | None = None) -> None:
    """Make exactly ``files`` (their data) and ``dirs`` (the names just created, renamed or
    removed in them) durable - never the whole filesystem (``syncfs`` would also wait for every
    other process's unflushed writes).

    Batched like git's ``core.fsyncMethod=batch``: every file's data is written out with
    ``sync_file_range`` (started for all, then waited for), then ONE fsync of a file just created
    among them (``_commit_journal``) commits the filesystem journal - which holds every name and
    inode change made so far, in order - and flushes the device cache over the data written out. Without sync_file_range, or
    with ``ITERION_FSYNC_METHOD=fsync``, each file and then each directory is fsynced
    (concurrently, so the journal folds them). Either way files come before names: a name made
    durable never points at data that is not. Relative paths are taken from ``dir_fd``.

    The batch's commit creates (and removes) a file named ``dummy_prefix...tmp`` in
    ``journal_dir``, by default the first of ``dirs`` (or the first file's directory). Pass
    ``journal_dir`` where such a name must never be seen even briefly (inside .git/objects/xx or
    a refs directory, say); it must be on the same filesystem as every one of ``dirs`` (the
    journal is per filesystem), else each file and directory is fsynced instead.
    """
    fs, ds = sorted(set(files)), sorted(set(dirs))
    if not fs and not ds:
        return
    sfr = None if os.environ.get(FSYNC_METHOD_ENV) == "fsync" else _sync_file_range()
    if journal_dir is None:
        journal_dir = ds[0] if ds else os.path.dirname(fs[0]) or "."
    elif not _same_filesystem(journal_dir, ds or [os.path.dirname(f) or "." for f in fs], dir_fd):
        sfr = None
    if sfr is not None and _write_out(fs, dir_fd, sfr) and _commit_journal(journal_dir, dir_fd, dummy_prefix):
        return
    _fsync_each(fs, dir_fd, False)
    _fsync_each(ds, dir_fd, True)


def _same_filesystem(journal_dir: str, dirs: list[str], dir_fd: int | None) -> bool:
    try:
        dev = os.stat(journal_dir, dir_fd=dir_fd).st_dev
        return all(os.stat(d, dir_fd=dir_fd).st_dev == dev for d in dirs)
    except OSError:
        return False


def _commit_journal(directory: str, dir_fd: int | None, prefix: str) -> bool:
    """fsync a file created just now in ``directory``: its creation is in the journal's running
    transaction, so the fsync commits that transaction - every change before it included, the
    earlier transactions being committed already - and flushes the device cache. (An fsync of a
    file or directory changed earlier may find its own change committed and commit nothing.)
    The file is removed again; a crash leaves it as a temp leftover named ``prefix...tmp``."""
    name = os.path.join(directory, f"{prefix}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass


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
    except OSError as exc:
        if exc.filename is None or exc.filename == str(tmp):
            # the failure names what the caller writes, never its temp file (which is gone)
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path | str, text: str, *, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def is_temp_leftover(path: Path) -> bool:
    """True for a temp file a killed writer left behind (safe to delete, never a document)."""
    return path.name.startswith(".") and path.name.endswith(TMP_SUFFIX)
