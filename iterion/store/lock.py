"""The per-run execution lock (``runs/<run>/lock``): one process executes a run at a time.

An exclusive ``fcntl.flock``: the kernel drops it when the holder dies (SIGKILL included), so a
crashed owner never leaves a lock someone must clean by hand. The file also records the
owner's pid/host/time for display; the flock, not that record, is what proves liveness. The
file is never deleted (unlinking a flocked file lets a second process lock a fresh inode).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Any

from iterion.store.errors import LockHeldError, StoreError
from iterion.store.liveness import process_start
from iterion.store.timeutil import utcnow

LOCK_FILE = "lock"


def lock_path(run_dir: Path) -> Path:
    return Path(run_dir) / LOCK_FILE


def check_lock_path(path: Path) -> None:
    """A directory (or any non-file) where the lock file belongs is a one-line refusal (exit 2)."""
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise StoreError(f"run {path.parent.name}: its lock file {path} is not a regular file",
                         hint=f"remove it (it is not iterion's; `rm -r {path}`) and retry: the lock file is recreated")


def _open_lock(path: Path, flags: int) -> int:
    check_lock_path(path)
    return os.open(path, flags, 0o644)


def _flock_nb(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def is_held(run_dir: Path) -> bool:
    """Does some open file description (any process, this one included) hold the run's lock?"""
    path = lock_path(run_dir)
    try:
        fd = _open_lock(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        if _flock_nb(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)


def read_owner(run_dir: Path) -> dict[str, Any] | None:
    """The owner record the last holder wrote ({pid, host, started}), or None."""
    try:
        text = lock_path(run_dir).read_text()
        data = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunLock:
    """``try_acquire()`` / ``release()``, or ``with RunLock(d).acquired():`` (raises LockHeldError)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = lock_path(self.run_dir)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Held by THIS object."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(self.path, os.O_RDWR | os.O_CREAT)
        if not _flock_nb(fd):
            os.close(fd)
            return False
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": utcnow().isoformat(),
                 "proc_start": process_start()}
        data = json.dumps(owner).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        self._fd = fd
        return True

    def acquire(self) -> None:
        """Like try_acquire, but raise a LockHeldError naming the owner when another holds it."""
        if not self.try_acquire():
            owner = read_owner(self.run_dir) or {}
            who = f" (pid {owner.get('pid')} on {owner.get('host')}, since {owner.get('started')})" if owner else ""
            raise LockHeldError(
                f"run {self.run_dir.name} is being executed by another process{who}",
                hint="wait for it to stop, or cancel it; two processes never execute one run",
            )

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
