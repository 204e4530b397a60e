"""A blocking exclusive flock around a critical section, shared by every layer.

flock is per open file description: two opens conflict even inside one process, so this
serialises threads and processes alike, and the kernel drops the lock when its holder dies
(SIGKILL included), so a crashed writer never wedges the next one.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive flock on ``path`` (created if missing) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
