"""A small preallocated file per run, released to record the run's final status on a full disk.

When the disk fills during a run, every write fails, including the one that would record why the
run stopped, which would leave it ``running`` with no owner. So each run keeps ``.space-reserve``
(preallocated with ``posix_fallocate``, else written with zeros) big enough to rewrite run.json
and append a few events; the engine deletes it when a write fails for lack of space, then records
``failed_resumable``. Invariant: a run that is not final holds its reserve (re-made on resume);
after a crash at any point the file is either absent or complete (written under a temp name and
renamed), never a half-allocated one that looks complete.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

RESERVE_FILE = ".space-reserve"
MIN_RESERVE_BYTES = 32 * 1024

# write failures that mean "the disk cannot take more": the run stops resumable, nothing is corrupt
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def is_storage_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def reserve_size(run_json: Path) -> int:
    """What a new reserve holds: two rewrites of run.json plus room for a few events."""
    return 2 * _size_of(run_json) + MIN_RESERVE_BYTES


def reserve_floor(run_json: Path) -> int:
    """The least an existing reserve must hold (one rewrite plus the events): above it a reserve is
    kept as it is, so a resume that is then refused leaves the store byte-for-byte unchanged."""
    return _size_of(run_json) + MIN_RESERVE_BYTES


def _fill(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
    block = b"\0" * 65536
    written = 0
    while written < size:
        written += os.write(fd, block[: min(len(block), size - written)])


def ensure_reserve(run_dir: Path, size: int, floor: int | None = None) -> None:
    """Make ``run_dir/.space-reserve`` ``size`` bytes unless it already holds ``floor`` (default
    ``size``) or more (raises OSError, e.g. ENOSPC)."""
    path = Path(run_dir) / RESERVE_FILE
    try:
        if path.stat().st_size >= (size if floor is None else floor):
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f"{RESERVE_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _fill(fd, size)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)


def release_reserve(run_dir: Path) -> bool:
    """Delete the reserve (its space is free at once); True if there was one."""
    try:
        (Path(run_dir) / RESERVE_FILE).unlink()
        return True
    except FileNotFoundError:
        return False
