"""The engine's use of the workspace lock (``iterion.store.workspace_lock``): launch and resume
of an in-place run hold it while they execute, a rewind while it restores files; worktree runs
never take it."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from iterion.store import Store, WorkspaceMode
from iterion.store.workspace_lock import WorkspaceLock

# workspaces whose lock a parent run of this thread holds for its subbot child
# (iterion/engine/nodes/subbot.py): the child, launched or resumed in-process, runs under it
_LENT: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("lent_workspaces", default=frozenset())


@contextmanager
def lend_workspace(workspace: Path) -> Iterator[None]:
    """While this holds, a launch/resume in this thread of ``workspace`` takes no lock of its own:
    the parent that holds it is blocked on the child, so one run executes there at a time still."""
    token = _LENT.set(_LENT.get() | {str(workspace.resolve())})
    try:
        yield
    finally:
        _LENT.reset(token)


def hold_workspace(store: Store, workspace: Path, run_id: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None,
                   refusal: str | None = None) -> WorkspaceLock | None:
    """The workspace lock of ``workspace``, taken for ``run_id`` (waits, or refuses without ``wait``);
    None when a parent run of this thread holds it for its child (``lend_workspace``)."""
    if str(workspace.resolve()) in _LENT.get():
        return None
    lock = WorkspaceLock(store.root, workspace, run_id)
    lock.acquire(wait=wait, on_wait=on_wait, refusal=refusal)
    return lock


def hold_for_restore(store: Store, run_id: str) -> WorkspaceLock | None:
    """A rewind restoring an in-place run's files takes the workspace lock too, without waiting:
    restoring files under a run that is executing there would clobber it."""
    doc = store.load_run(run_id)
    if doc.workspace_mode is not WorkspaceMode.IN_PLACE or not doc.workspace_dir:
        return None
    return hold_workspace(store, Path(doc.workspace_dir), run_id, wait=False,
                          refusal="a rewind does not restore files under an executing run: rewind once it "
                                  "parks or finishes, or with --restore-scope none")


def release_workspace(lock: WorkspaceLock | None) -> None:
    if lock is not None:
        lock.release()
