"""The ONE place that chooses how a run's workspace is versioned, behind one small interface.

* worktree runs (``worktree: auto``): boundary commits through ``gitrefs.RunRefs``; with the
  watcher on, a boundary stages only the paths the change journal reported into the run's
  private index (``gitrefs.private_index.stage_reported_paths``), re-verifying with a full
  ``git add -A`` on any doubt: the first boundary of a process (a restart), a journal overflow or
  any other loss of trust, and whatever ``stage_reported_paths`` itself refuses;
* in-place runs: snapshots through ``workspacetrack.Tracker``, whose store lives under the
  run's directory in the run store - never in the operator's workspace.

The engine calls ``mark(label)`` at every boundary; rewind calls ``produced_scope(pivot)``; a
takeover of a run whose process died marks a ``takeover`` boundary (``iterion.engine.takeover``).
Boundary writes are serialized: parallel branches share one workspace and one chain.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from gitrefs.produced_scope import ChainEntry, ProducedScope
from iterion.store import RunDoc, Store, WorkspaceMode

GITREFS = "gitrefs"
WORKSPACETRACK = "workspacetrack"


def capture_skipped_payload(label: str, skipped: dict[str, str], size_cap: int | None = None) -> dict[str, Any]:
    """The ``workspace_capture_skipped`` event: what a boundary's capture left out, and why."""
    from workspacetrack.names import display, raw_paths
    from workspacetrack.reasons import describe

    return {"label": label,
            "skipped": [{"path": display(p), "reason": describe(r, size_cap)} for p, r in sorted(skipped.items())],
            "raw_paths": raw_paths(skipped)}


@dataclass(frozen=True)
class Mark:
    label: BoundaryLabel
    state: str  # commit id (gitrefs) or snapshot id (workspacetrack)


class Versioning(ABC):
    mechanism: str

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def mark(self, label: BoundaryLabel) -> Mark:
        with self._lock:
            return Mark(label, self._write(label))

    @abstractmethod
    def _write(self, label: BoundaryLabel) -> str: ...

    @abstractmethod
    def chain(self) -> list[ChainEntry]: ...

    @abstractmethod
    def produced_scope(self, pivot: BoundaryLabel) -> ProducedScope: ...

    @abstractmethod
    def changed_paths(self, a: str, b: str) -> set[str]:
        """Paths that differ between two recorded states (ids from ``chain()`` / ``mark()``)."""

    def has(self, label: BoundaryLabel) -> bool:
        return any(entry.label == label for entry in self.chain())

    def labels(self) -> list[str]:
        return [str(entry.label) for entry in self.chain()]

    def capture_skipped(self) -> dict[str, str]:
        """Paths the last ``mark`` newly left out of its capture (path -> reason); {} if none."""
        return {}

    def close(self) -> None:
        """Release watchers/handles (idempotent)."""

    @property
    def backend(self) -> Any:
        """The underlying RunRefs or Tracker (for rewind's restore)."""
        raise NotImplementedError


class GitVersioning(Versioning):
    mechanism = GITREFS

    def __init__(self, workspace: Path, run_id: str, *, base: str | None = None, start: bool = False,
                 watch: bool = False) -> None:
        super().__init__()
        from gitrefs import RunRefs

        self._refs = RunRefs.start(workspace, run_id, base=base) if start else RunRefs(workspace, run_id)
        self._journal: Any = None
        self._armed = False  # the journal holds every change since the last boundary's full add
        if watch:
            from workspacetrack.journal import Journal

            journal = Journal(str(Path(workspace).resolve()))
            try:
                journal.start()
            except Exception:  # noqa: BLE001 - the journal is an optimisation; boundaries fall back to git add -A
                journal.stop()
            self._journal = journal if journal.active else None

    def _write(self, label: BoundaryLabel) -> str:
        j = self._journal
        if j is None or label.kind.is_alias:
            return str(self._refs.write_boundary(label).commit)
        reported: list[str] | None = None
        if self._armed and j.trusted():
            dirty, trees = j.drain()
            reported = sorted(dirty | trees)
        else:
            # Watches first, then the full `git add -A`: every change is either in that
            # baseline or journaled for the next boundary.
            j.arm()
        try:
            commit = str(self._refs.write_boundary(label, reported).commit)
        except BaseException:
            self._armed = False  # what was drained may not be staged: the next boundary re-verifies
            raise
        self._armed = j.trusted()
        return commit

    def chain(self) -> list[ChainEntry]:
        return list(self._refs.chain_entries())

    def produced_scope(self, pivot: BoundaryLabel) -> ProducedScope:
        return self._refs.produced_scope(pivot)

    def changed_paths(self, a: str, b: str) -> set[str]:
        return set(self._refs.changed_paths(a, b))

    def close(self) -> None:
        if self._journal is not None:
            journal, self._journal = self._journal, None
            try:
                journal.stop()
            except Exception:  # noqa: BLE001 - closing must not mask the run's own outcome
                pass

    @property
    def backend(self) -> Any:
        return self._refs


class TrackVersioning(Versioning):
    mechanism = WORKSPACETRACK

    def __init__(self, track_dir: Path, workspace: Path, run_id: str, *, watch: bool = True,
                 scratch: Path | None = None) -> None:
        super().__init__()
        from workspacetrack.tracker import Tracker

        self._tracker = Tracker(track_dir, workspace, run_id, scratch=scratch)
        self._watching = False
        if watch:
            try:
                self._tracker.start_watching()
                self._watching = True
            except Exception:  # noqa: BLE001 - the journal is an optimisation; captures fall back to a walk
                self._watching = False

    def _write(self, label: BoundaryLabel) -> str:
        return str(self._tracker.capture(label).id)

    def capture_skipped(self) -> dict[str, str]:
        return dict(self._tracker.newly_skipped)

    def chain(self) -> list[ChainEntry]:
        return list(self._tracker.chain_entries())

    def produced_scope(self, pivot: BoundaryLabel) -> ProducedScope:
        return self._tracker.produced_scope(pivot)

    def changed_paths(self, a: str, b: str) -> set[str]:
        return {c.path for c in self._tracker.changes(a, b)}

    def close(self) -> None:
        if self._watching:
            self._watching = False
            try:
                self._tracker.stop_watching()
            except Exception:  # noqa: BLE001 - closing must not mask the run's own outcome
                pass

    @property
    def backend(self) -> Any:
        return self._tracker


def open_versioning(*, worktree: bool, workspace: Path, run_dir: Path, run_id: str,
                    base: str | None = None, start: bool = False, watch: bool = True,
                    scratch: Path | None = None) -> Versioning:
    """The mechanism for this run shape (see module doc). ``start`` on launch, not on resume.
    ``scratch`` (in place): read the run's track store and write nothing to it (a dry run)."""
    if worktree:
        return GitVersioning(workspace, run_id, base=base, start=start, watch=watch)
    return TrackVersioning(Path(run_dir) / "track", workspace, run_id, watch=watch, scratch=scratch)


def open_run_versioning(store: Store, doc: RunDoc, *, start: bool, watch: bool = True) -> Versioning:
    """The mechanism of a run the store holds (its document says which)."""
    worktree = doc.workspace_mode is WorkspaceMode.WORKTREE
    return open_versioning(worktree=worktree, workspace=Path(doc.workspace_dir), run_dir=store.run_dir(doc.id),
                           run_id=doc.id, base=doc.worktree.base_commit if (worktree and doc.worktree) else None,
                           start=start, watch=watch)


def label(kind: BoundaryKind, node: str, iteration: int) -> BoundaryLabel:
    return BoundaryLabel(kind, node, iteration)
