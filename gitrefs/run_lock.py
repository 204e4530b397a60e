"""One writer at a time per run: the chain head is read, extended and moved as one step.

Parallel fan-out branches may write boundaries of the same run at once; without the lock two
boundaries could both chain on the same head and one would fall out of the chain. flock locks
conflict between separate opens even inside one process, so this serialises threads and
processes alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gitrefs.persist import file_lock

__all__ = ["file_lock", "run_lock"]


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    with file_lock(run_dir / "lock"):
        yield
