"""One writer at a time per run: the chain head is read, extended and moved as one step.

Parallel fan-out branches may write boundaries of the same run at once; without the lock two
boundaries could both chain on the same head and one would fall out of the chain. flock locks
conflict between separate opens even inside one process, so this serialises threads and
processes alike.
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
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    with file_lock(run_dir / "lock"):
        yield
