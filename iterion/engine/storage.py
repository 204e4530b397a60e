"""A full (or read-only) disk during a run: the run stops ``failed_resumable``, never ``running``.

Where a write of the run fails with ENOSPC, EDQUOT or EROFS (the store's checkpoint, run document,
artifacts, interactions, the workspace tracker's data, a worktree's git objects), the engine turns
it into a ``STORAGE_UNWRITABLE`` failure instead of an unexpected error. If even the failure
checkpoint cannot be written, the previous checkpoint on disk is still intact (every checkpoint
is written atomically), so the run parks ``failed_resumable`` anchored there: a resume after space
is freed re-executes from the last node boundary that was recorded. To have room to record that
status, the run's space reserve (store/reserve.py) is released first. That stop is
``iterion.engine.stop.park_on_storage``.
"""

from __future__ import annotations

import os
from typing import Any

from iterion.engine.errors import NodeFailure
from iterion.failure_codes import FailureCode
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


def write_status(store: Any, run_id: str, mutate: Any) -> None:
    """``store.update_run`` that, on a full disk, releases the run's reserve and tries once more:
    the final status of a run is the one write that must land. The PII vault's raw values are
    scrubbed from it on the way (iterion.builtins.vault)."""
    from iterion.builtins.vault import scrub_run_fields

    run_dir = store.run_dir(run_id)

    def scrubbed(doc: Any) -> None:
        mutate(doc)
        scrub_run_fields(run_dir, doc)

    try:
        store.update_run(run_id, scrubbed)
    except OSError as exc:
        if storage_oserror(exc) is None or not store.release_reserve(run_id):
            raise
        store.update_run(run_id, scrubbed)
