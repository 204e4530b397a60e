"""The engine's use of the workspace lock (``iterion.store.workspace_lock``): launch and resume
of an in-place run hold it while they execute; worktree runs never take it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from iterion.store import Store
from iterion.store.workspace_lock import WorkspaceLock


def hold_workspace(store: Store, workspace: Path, run_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> WorkspaceLock:
    """The workspace lock of ``workspace``, taken for ``run_id`` (waits, or refuses without ``wait``)."""
    lock = WorkspaceLock(store.root, workspace, run_id)
    lock.acquire(wait=wait, on_wait=on_wait)
    return lock


def release_workspace(lock: WorkspaceLock | None) -> None:
    if lock is not None:
        lock.release()
