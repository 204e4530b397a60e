"""The ONE place that chooses how a run's workspace is versioned, behind one interface.

* worktree runs (``worktree: auto``): boundary commits through ``gitrefs.RunRefs``; with the
  watcher on, a boundary stages only the paths the change journal reported into the run's
  private index (``gitrefs.private_index.stage_reported_paths``), re-verifying with a full
  ``git add -A`` on any doubt: the first boundary of a process (a restart), a journal overflow or
  any other loss of trust, and whatever ``stage_reported_paths`` itself refuses;
* in-place runs: snapshots through ``workspacetrack.Tracker``, whose store lives under the
  run's directory in the run store - never in the operator's workspace;
* tests: ``MemoryVersioning`` (iterion/engine/versioning_memory.py), snapshots held by the process.

``Versioning`` is the whole mechanism: recording (``mark``/``chain``/``produced_scope``/
``changed_paths``), restoring (``restore``, with dry run, protected paths and other runs),
``missing_objects``, ``undo`` and ``undo_command``, the ``state_reader`` for diffs and the
``push_state``/``push_dir`` of a checkpoint push. Callers never branch on the mechanism; the
contract each operation keeps is written in docs/technical/durability.md ("Versioning"), and
tests/versioning/test_contract.py holds every implementation to it. The escape hatch, for code
that is about one mechanism (its own tests, ``iterion track``): ``GitVersioning.refs`` and
``TrackVersioning.tracker``, typed, on the concrete classes only.

The engine calls ``mark(label)`` at every boundary; rewind calls ``produced_scope(pivot)`` and
``restore``; a takeover of a run whose process died marks a ``takeover`` boundary
(``iterion.engine.takeover``). Boundary writes are serialized: parallel branches share one
workspace and one chain.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from gitrefs.produced_scope import ChainEntry, ProducedScope
from iterion.engine import versioning_git, versioning_track
from iterion.engine.versioning_types import (
    GITREFS,
    WORKSPACETRACK,
    FilesReport,
    MissingObject,
    OnPlanned,
    PushState,
    RestoreRequest,
    RestoreScope,
    StateChange,
    UndoBank,
    UndoOutcome,
)
from iterion.store import RunDoc, Store, WorkspaceMode

if TYPE_CHECKING:
    from gitrefs import RunRefs
    from workspacetrack.journal import Journal
    from workspacetrack.tracker import Tracker


def mechanism_of(worktree: bool) -> str:
    """The mechanism name a run shape records (``FilesReport.mechanism``, the rewind intent)."""
    return GITREFS if worktree else WORKSPACETRACK


def worktree_of(mechanism: str) -> bool:
    """The run shape a recorded mechanism name stands for (the inverse of ``mechanism_of``)."""
    return mechanism == GITREFS


class StateReader(Protocol):
    """Reads two recorded states (ids from ``chain()``/``mark()``); never writes."""

    def changes(self, a: str, b: str) -> list[StateChange]: ...

    def unified_diff(self, a: str, b: str) -> tuple[str, bool]:
        """(unified diff text, truncated at ``versioning_types.DIFF_TOTAL_CAP``)."""
        ...


def capture_skipped_payload(label: str, skipped: dict[str, str], size_cap: int | None = None) -> dict[str, object]:
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

    def ensure_workspace(self) -> None:
        """Make the workspace exist before a node that touches files (``worktree.needs_workspace``):
        a lazily created worktree is made here; a no-op for every workspace that already exists."""

    # -- restoring ----------------------------------------------------------------------------
    # Whether another run may version the same directory: a produced restore then leaves in
    # place what those runs produced (iterion.rewind.other_runs). False: the workspace is the
    # run's own (a worktree).
    shares_workspace: bool = True
    # Whether ``push_state``'s commit is made for the push (an export of the head state), so a
    # pushed state stands as the bank of a failed or cancelled run (its ``final_commit``); False:
    # it is a boundary commit, and the run is banked on its own branch instead.
    push_is_bank: bool = True

    @property
    def size_cap(self) -> int | None:
        """Files larger than this were left out of captures (None: no cap)."""
        return None

    @abstractmethod
    def restore(self, req: RestoreRequest, on_planned: OnPlanned | None = None) -> FilesReport:
        """Restore (``req.dry_run``: preview) the workspace to ``req.anchor``, a recorded label.

        Banks the disk as it stands before the first write (``backup_ref``); never writes a
        ``req.protected`` path; ``on_planned`` sees the decision after banking, before the first
        write; ``req.planned`` finishes a recorded decision (idempotent). A dry run writes
        nothing anywhere."""

    @abstractmethod
    def missing_objects(self, anchor: BoundaryLabel, scope: RestoreScope, protected: list[str]) -> list[MissingObject]:
        """What a restore to ``anchor`` may read and the store lacks; reads only."""

    @property
    @abstractmethod
    def objects_home(self) -> str:
        """Where the recorded content lives, for a person (``the repository``)."""

    @abstractmethod
    def recorded_at(self, anchor: BoundaryLabel) -> str | None:
        """When ``anchor`` was recorded (ISO 8601 UTC; None: it was not)."""

    @abstractmethod
    def recorded_paths(self, after: str | None = None) -> frozenset[str]:
        """Paths the run changed in its own recorded intervals (``gitrefs.produced_scope``'s rule
        over the whole chain); with ``after`` (ISO time), only intervals closed after it."""

    @abstractmethod
    def undo_command(self, report: FilesReport) -> str | None:
        """A shell command putting the bank's content of ``report.overwritten`` back (None: none)."""

    @abstractmethod
    def undo(self, bank: UndoBank, *, completing: bool = False) -> UndoOutcome:
        """Put back, from ``bank``, what the restore that took it changed. ``completing``: an undo a
        killed process began (it converges on the bank whatever part of it landed). Raises a
        ``UserError`` when the workspace moved on since."""

    # -- reading and pushing ------------------------------------------------------------------
    @abstractmethod
    def state_reader(self) -> StateReader: ...

    @abstractmethod
    def push_state(self) -> PushState:
        """A commit, in the workspace's repository, holding the latest recorded state."""

    @abstractmethod
    def push_dir(self) -> Path:
        """The top of the checkout whose repository holds ``push_state``'s commit."""


class GitVersioning(Versioning):
    mechanism = GITREFS
    shares_workspace = False  # a worktree is the run's own
    push_is_bank = False

    def __init__(self, workspace: Path, run_id: str, *, base: str | None = None, start: bool = False,
                 watch: bool = False, pending: Callable[[], Path] | None = None,
                 repo: Path | None = None) -> None:
        """``pending``: the worktree is not created yet (lazy creation, iterion/engine/worktree.py);
        it makes it. Until then the run's refs are read and written through ``repo``, the checkout
        it will be added to (they live in the common git directory), and a boundary records the
        chain head's tree: nothing can have changed in a checkout that does not exist."""
        super().__init__()
        from gitrefs import RunRefs

        self.workspace = Path(workspace)
        self.run_id = run_id
        self._pending = pending if repo is not None else None
        where = repo if self._pending is not None and repo is not None else workspace
        self._refs = RunRefs.start(where, run_id, base=base) if start else RunRefs(where, run_id)
        self._journal: Journal | None = None
        self._armed = False  # the journal holds every change since the last boundary's full add
        self._watch = watch
        if watch and self._pending is None:
            self._start_journal()

    def ensure_workspace(self) -> None:
        with self._lock:
            if self._pending is None:
                return
            from gitrefs import RunRefs

            self.workspace = self._pending()
            self._pending = None
            # the private index is per worktree: the first boundary there is a full add (as a restart)
            self._refs = RunRefs(self.workspace, self.run_id)
            if self._watch:
                self._start_journal()

    def _start_journal(self) -> None:
        from workspacetrack.journal import Journal

        journal = Journal(str(self.workspace.resolve()))
        try:
            journal.start()
        except Exception:  # noqa: BLE001 - the journal is an optimisation; boundaries fall back to git add -A
            journal.stop()
        self._journal = journal if journal.active else None

    def _write(self, label: BoundaryLabel) -> str:
        if self._pending is not None:
            return str(self._refs.write_boundary(label, unchanged=not label.kind.is_alias).commit)
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
    def refs(self) -> RunRefs:
        """The escape hatch: this mechanism's own object (see module doc)."""
        return self._refs

    def restore(self, req: RestoreRequest, on_planned: OnPlanned | None = None) -> FilesReport:
        report = FilesReport(mechanism=self.mechanism, scope=req.scope.value, anchor=str(req.anchor))
        versioning_git.restore(self._refs, self.workspace, req, report, on_planned)
        return report

    def missing_objects(self, anchor: BoundaryLabel, scope: RestoreScope, protected: list[str]) -> list[MissingObject]:
        return versioning_git.missing_objects(self._refs, anchor)

    @property
    def objects_home(self) -> str:
        return "the repository"

    def recorded_at(self, anchor: BoundaryLabel) -> str | None:
        return versioning_git.recorded_at(self._refs, anchor)

    def recorded_paths(self, after: str | None = None) -> frozenset[str]:
        return versioning_git.recorded_paths(self._refs, after)

    def undo_command(self, report: FilesReport) -> str | None:
        if not report.overwritten or not report.backup_ref:
            return None
        return versioning_git.undo_command(self._refs, report, self.workspace)

    def undo(self, bank: UndoBank, *, completing: bool = False) -> UndoOutcome:
        return versioning_git.undo(self._refs, bank, completing=completing)

    def state_reader(self) -> StateReader:
        return versioning_git.GitStateReader(self._refs.repo)

    def push_state(self) -> PushState:
        return versioning_git.push_state(self._refs)

    def push_dir(self) -> Path:
        return Path(self._refs.ws.workdir)


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
    def tracker(self) -> Tracker:
        """The escape hatch: this mechanism's own object (see module doc)."""
        return self._tracker

    @property
    def size_cap(self) -> int | None:
        return self._tracker.size_cap

    def restore(self, req: RestoreRequest, on_planned: OnPlanned | None = None) -> FilesReport:
        report = FilesReport(mechanism=self.mechanism, scope=req.scope.value, anchor=str(req.anchor))
        versioning_track.restore(self._tracker, req, report, on_planned)
        return report

    def missing_objects(self, anchor: BoundaryLabel, scope: RestoreScope, protected: list[str]) -> list[MissingObject]:
        return versioning_track.missing_objects(self._tracker, anchor, scope, protected)

    @property
    def objects_home(self) -> str:
        return f"the snapshot store {self._tracker.store.root}"

    def recorded_at(self, anchor: BoundaryLabel) -> str | None:
        from workspacetrack.errors import TrackError

        try:
            return self._tracker.resolve(str(anchor)).created_at
        except TrackError:
            return None

    def recorded_paths(self, after: str | None = None) -> frozenset[str]:
        return self._tracker.recorded_paths(after=after)

    def undo_command(self, report: FilesReport) -> str | None:
        if not report.overwritten or not report.backup_ref:
            return None
        return versioning_track.undo_command(self._tracker, report)

    def undo(self, bank: UndoBank, *, completing: bool = False) -> UndoOutcome:
        return versioning_track.undo(self._tracker, bank)

    def state_reader(self) -> StateReader:
        return versioning_track.TrackStateReader(self._tracker.store)

    def push_state(self) -> PushState:
        return versioning_track.push_state(self._tracker)

    def push_dir(self) -> Path:
        from gitrefs.workspace import open_workspace

        return Path(open_workspace(self._tracker.workspace).workdir)


_OVERRIDE: Callable[[Path, str], Versioning] | None = None


def set_override(factory: Callable[[Path, str], Versioning] | None) -> None:
    """Make ``open_versioning`` build every run's versioning with ``factory(workspace, run_id)``
    (None: back to the run shape's mechanism). For tests: ``versioning_memory.use_memory_versioning``."""
    global _OVERRIDE
    _OVERRIDE = factory


def open_versioning(*, worktree: bool, workspace: Path, run_dir: Path, run_id: str,
                    base: str | None = None, start: bool = False, watch: bool = True,
                    scratch: Path | None = None) -> Versioning:
    """The mechanism for this run shape (see module doc). ``start`` on launch, not on resume.
    ``scratch`` (in place): read the run's track store and write nothing to it (a dry run)."""
    if _OVERRIDE is not None:
        return _OVERRIDE(Path(workspace), run_id)
    if worktree:
        return GitVersioning(workspace, run_id, base=base, start=start, watch=watch)
    return TrackVersioning(Path(run_dir) / "track", workspace, run_id, watch=watch, scratch=scratch)


def open_run_versioning(store: Store, doc: RunDoc, *, start: bool, watch: bool = True) -> Versioning:
    """The mechanism of a run the store holds (its document says which). A worktree not created
    yet (lazy creation) is made by ``ensure_workspace``, before the first node that needs it."""
    worktree = doc.workspace_mode is WorkspaceMode.WORKTREE
    wt = doc.worktree
    if worktree and wt is not None and not wt.created:
        from iterion.engine.worktree import materialize_worktree

        def make() -> Path:
            return materialize_worktree(store, doc.id)

        if _OVERRIDE is not None:  # a test mechanism reads the directory itself: made now
            make()
        else:
            return GitVersioning(Path(wt.path), doc.id, base=wt.base_commit, start=start, watch=watch,
                                 pending=make, repo=Path(doc.options.get("repo_dir") or wt.path))
    return open_versioning(worktree=worktree, workspace=Path(doc.workspace_dir), run_dir=store.run_dir(doc.id),
                           run_id=doc.id, base=doc.worktree.base_commit if (worktree and doc.worktree) else None,
                           start=start, watch=watch)


def open_state_reader(store: Store, doc: RunDoc) -> StateReader | None:
    """A reader of the run's recorded states that opens nothing for writing (no lock, no index,
    no watcher): what the web page's diffs read. None: the run recorded no state yet. A worktree
    run's commits are read from the checkout it was added to (they outlive a released worktree)."""
    if doc.workspace_mode is WorkspaceMode.WORKTREE:
        repo_dir = doc.options.get("repo_dir") or (doc.worktree.path if doc.worktree else doc.workspace_dir)
        return versioning_git.open_reader(str(repo_dir))
    from workspacetrack.store import TrackStore

    track = TrackStore(store.run_dir(doc.id) / "track", doc.id)
    if track.load_state() is None:
        return None
    return versioning_track.TrackStateReader(track)


def label(kind: BoundaryKind, node: str, iteration: int) -> BoundaryLabel:
    return BoundaryLabel(kind, node, iteration)
