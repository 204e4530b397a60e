"""A short-lived exclusive flock around a read-check-write (not the per-run execution lock)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def short_lock(path: Path) -> Iterator[None]:
    """Serialize a critical section across threads and processes; the kernel frees it on death."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
