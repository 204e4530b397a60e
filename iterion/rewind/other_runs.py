"""Other runs of the same in-place workspace: whose work a rewind must leave where it is.

A rewind's produced scope is what THIS run's recorded intervals changed. When several runs
share one in-place workspace, another run may have produced some of those paths too (runs
that executed concurrently before the workspace lock existed, or one run changing a file
after this one recorded it). Restoring such a path would undo the other run's work, so the
produced scope leaves it in place and the report names the run (``gitrefs.produced_scope``
holds the rule; this module only finds the runs).

Counted: each other in-place run of the same workspace (same real path, or one nested in the
other: their paths are re-rooted) in this store, for the
intervals of its own chain (idle pause/fail -> resume intervals excluded) whose closing
boundary was captured after this run's pivot - what another run did before the pivot is part
of the state the pivot restores to, so it is never at risk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gitrefs.boundary import BoundaryLabel
from gitrefs.produced_scope import other_runs_paths
from iterion.engine.versioning import Versioning, open_run_versioning
from iterion.engine.versioning_types import CHANGED_SINCE, OTHER_RUN, OtherRuns
from iterion.store import RunDoc, Store, WorkspaceMode
from workspacetrack.errors import TrackError

__all__ = ["CHANGED_SINCE", "OTHER_RUN", "attribute", "other_runs_production"]


def _translate(theirs: str, ours: str) -> Callable[[str], str | None] | None:
    """Map a path relative to workspace ``theirs`` onto one relative to ``ours`` (None: no overlap).

    Same real path: identity. Nested workspaces (a run in ``repo/sub`` and one in ``repo``)
    overlap too: the paths are re-rooted; paths outside ``ours`` map to None."""
    t, o = Path(os.path.realpath(theirs)), Path(os.path.realpath(ours))
    if t == o:
        return lambda p: p
    if t.is_relative_to(o):
        prefix = t.relative_to(o).as_posix() + "/"
        return lambda p: prefix + p
    if o.is_relative_to(t):
        cut = o.relative_to(t).as_posix() + "/"
        return lambda p: p[len(cut):] if p.startswith(cut) else None
    return None


def other_runs_production(store: Store, doc: RunDoc, versioning: Versioning, anchor: BoundaryLabel) -> OtherRuns:
    """(run id, paths it produced after this run's ``anchor`` was recorded), oldest run first;
    none when the run's workspace is its own (``Versioning.shares_workspace``)."""
    since = versioning.recorded_at(anchor) if versioning.shares_workspace else None
    if since is None:
        return []
    out: OtherRuns = []
    for other in store.list_runs():
        if other.id == doc.id or other.workspace_mode is not WorkspaceMode.IN_PLACE \
                or not other.workspace_dir or not doc.workspace_dir:
            continue
        onto = _translate(other.workspace_dir, doc.workspace_dir)
        if onto is None or not store.track_dir(other.id).is_dir():
            continue  # (a run that recorded nothing: opening its record would create one)
        try:
            theirs_v = open_run_versioning(store, other, start=False, watch=False)
        except (TrackError, OSError, ValueError):
            continue  # an unreadable record protects nothing, and must not block this rewind
        try:
            theirs = theirs_v.recorded_paths(after=since)
        except (TrackError, OSError, ValueError):
            continue
        finally:
            theirs_v.close()
        paths = frozenset(q for q in map(onto, theirs) if q is not None)
        if paths:
            out.append((other.id, paths))
    return out


def attribute(paths: list[str], others: list[tuple[str, frozenset[str]]]) -> dict[str, str]:
    """path -> the other run that produced it, for the ``paths`` any other run produced."""
    return other_runs_paths(paths, others)
