"""The dry run's one versioning of a run's workspace (``rewind --dry-run``'s planning).

A dry run reads the run's record three times - the pivots it recorded (``_pre_iterations``),
the objects the restore would read (the object check), and the preview itself - and each used
to open its own versioning: for an in-place run, three trackers, each loading the run's state
and opening the repository again. ``LentVersioning`` opens it once, read-only (a scratch
directory takes whatever the preview's disk scan stores, so nothing is written to the store),
lends it to every step and closes it at the end: the plan's cost is one tracker's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from iterion.engine.versioning import Versioning, open_versioning


class LentVersioning:
    """One versioning per (mechanism, workspace, run), opened on first use, closed by ``close``."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._opened: dict[tuple[bool, Path, Path, str], Versioning] = {}

    def get(self, *, worktree: bool, workspace: Path, run_dir: Path, run_id: str) -> Versioning:
        key = (worktree, Path(workspace), Path(run_dir), run_id)
        v = self._opened.get(key)
        if v is None:
            scratch = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="iterion-preview-")))
            v = open_versioning(worktree=worktree, workspace=Path(workspace), run_dir=Path(run_dir), run_id=run_id,
                                watch=False, scratch=scratch)
            self._stack.callback(v.close)  # (closed before its scratch directory goes)
            self._opened[key] = v
        return v

    def close(self) -> None:
        self._opened.clear()
        self._stack.close()


@contextmanager
def versioning_for(lent: LentVersioning | None, *, worktree: bool, workspace: Path, run_dir: Path, run_id: str,
                   scratch: Path | None = None) -> Iterator[Versioning]:
    """The lent versioning when there is one (left open), else one opened for the caller alone
    (with ``scratch``: read-only) and closed when it is done."""
    if lent is not None:
        yield lent.get(worktree=worktree, workspace=workspace, run_dir=run_dir, run_id=run_id)
        return
    v = open_versioning(worktree=worktree, workspace=workspace, run_dir=run_dir, run_id=run_id, watch=False,
                        scratch=scratch)
    try:
        yield v
    finally:
        v.close()
