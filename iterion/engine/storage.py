"""A full (or read-only) disk during a run: the run stops ``failed_resumable``, never ``running``.

Where a write of the run fails with ENOSPC, EDQUOT or EROFS (the store's checkpoint, run document,
artifacts, interactions, the workspace tracker's data, a worktree's git objects), the engine turns
it into a ``STORAGE_UNWRITABLE`` failure instead of an unexpected error. If even the failure
checkpoint cannot be written, the previous checkpoint on disk is still intact (every checkpoint
is written atomically), so the run parks ``failed_resumable`` anchored there: a resume after space
is freed re-executes from the last node boundary that was recorded. To have room to record that
status, the run's space reserve (store/reserve.py) is released first.
"""

from __future__ import annotations

import os
from typing import Any

from iterion.engine.errors import NodeFailure
from iterion.engine.result import RunResult
from iterion.failure_codes import FailureCode
from iterion.store import RunStatus
from iterion.store import events as ev
from iterion.store.reserve import STORAGE_ERRNOS, is_storage_error

CODE = FailureCode.STORAGE_UNWRITABLE


# a child process (git writing a worktree's objects) reports the same errno as text
_STRERRORS = {os.strerror(e): e for e in STORAGE_ERRNOS}


def storage_oserror(exc: BaseException | None) -> OSError | None:
    """The ENOSPC/EDQUOT/EROFS OSError behind ``exc`` (itself, or in its cause/context chain; an
    error quoting a child process's "No space left on device" counts too)."""
    seen = 0
    while exc is not None and seen < 16:
        if is_storage_error(exc):
            assert isinstance(exc, OSError)
            return exc
        text = str(exc)
        for strerror, code in _STRERRORS.items():
            if strerror in text:
                return OSError(code, strerror)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def describe(err: OSError) -> str:
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{err.strerror or err}"


def storage_failure(exc: BaseException, what: str, node: str | None) -> NodeFailure | None:
    """A STORAGE_UNWRITABLE node failure for ``exc`` when a full/read-only disk caused it, else None."""
    err = storage_oserror(exc)
    if err is None:
        return None
    return NodeFailure(CODE, f"{what}: {describe(err)}; free space (or make the disk writable) and resume the run",
                       node=node)


def park_storage_failure(runner: Any, code: str | None, what: str) -> RunResult | None:
    """Park ``failed_resumable`` at the checkpoint already on disk, when a storage error is why the
    run could not write its checkpoint or status (None: not a storage failure, or nothing to resume)."""
    ctx = runner.ctx
    err: OSError | None = getattr(runner, "storage_error", None)
    if err is None and code != CODE.value:
        return None
    if not ctx.store.has_checkpoint(ctx.run_id):
        return None
    ctx.store.release_reserve(ctx.run_id)  # room for the status below and a few events
    try:
        cp = ctx.store.load_checkpoint(ctx.run_id)
    except Exception:  # noqa: BLE001 - only used for the message
        cp = None
    restart = cp.restart_node if cp is not None else None
    cause = describe(err) if err is not None else what
    error = (f"disk full or read-only: {cause}; the run stopped at its last checkpoint"
             + (f" (restart at {restart})" if restart else "")
             + "; free space (or make the disk writable) and resume it")
    runner._set_status(RunStatus.FAILED_RESUMABLE, code=CODE.value, error=error)
    ctx.emit(ev.RUN_FAILED, restart, None, {"code": CODE.value, "error": error, "resumable": True,
                                           "restart_node": restart})
    return runner._result()


def write_status(store: Any, run_id: str, mutate: Any) -> None:
    """``store.update_run`` that, on a full disk, releases the run's reserve and tries once more:
    the final status of a run is the one write that must land."""
    try:
        store.update_run(run_id, mutate)
    except OSError as exc:
        if storage_oserror(exc) is None or not store.release_reserve(run_id):
            raise
        store.update_run(run_id, mutate)
