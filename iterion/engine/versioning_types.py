"""The typed values the versioning interface (iterion/engine/versioning.py) takes and returns.

One home for each: the restore scope, the restore's report (``FilesReport``, whose JSON is the
``files`` object of ``iterion rewind --json`` and of ``run_rewound``: its fields are a persisted
format), what a restore needs that the store lacks, the bank an undo restores from, a state
diff's rows, and the commit a checkpoint push sends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from gitrefs.boundary import BoundaryLabel
from iterion.engine.versioning_plan import FilesPlan

GITREFS = "gitrefs"  # worktree runs: boundary commits through gitrefs.RunRefs
WORKSPACETRACK = "workspacetrack"  # in-place runs: snapshots through workspacetrack.Tracker
MEMORY = "memory"  # tests: snapshots held by the process (iterion/engine/versioning_memory.py)

# FilesReport.left_in_place_details reasons
OTHER_RUN = "produced by another run of this workspace in its own recorded intervals"
CHANGED_SINCE = "changed since the run's last boundary, outside the scope"
NONE_REASON = "--restore-scope none: the node replays against the tree as it stands"


class RestoreScope(StrEnum):
    PRODUCED = "produced"
    FULL = "full"
    NONE = "none"


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class LeftInPlace:
    """Why a path the rewind saw was not restored (``run_id``: the other run that produced it)."""

    path: str
    reason: str
    run_id: str | None = None


@dataclass
class FilesReport:
    mechanism: str  # gitrefs | workspacetrack
    scope: str
    anchor: str  # the boundary restored to, e.g. pre:implement:0
    reverted: bool = False
    restored: list[str] = field(default_factory=list)  # written back (created or changed)
    removed: list[str] = field(default_factory=list)  # did not exist at the anchor: deleted
    skipped: list[Skipped] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)  # matched neither side of the recorded range
    left_in_place: list[str] = field(default_factory=list)  # changed since the last boundary, out of scope
    # one entry per left_in_place path: why, and which other run of the workspace produced it
    left_in_place_details: list[LeftInPlace] = field(default_factory=list)
    # a dry run: what the scope covers (the preview); a restore: every path it touched or skipped
    in_scope: list[str] = field(default_factory=list)
    ref: str | None = None  # gitrefs: the anchor ref; workspacetrack: the anchor snapshot id
    revert_commit: str | None = None
    backup_ref: str | None = None  # gitrefs: the bank ref; workspacetrack: the bank snapshot id
    skip_reason: str | None = None  # why nothing was restored
    # paths above whose names are not UTF-8: display form (\xNN escapes) -> hex of the exact bytes
    raw_paths: dict[str, str] = field(default_factory=dict)
    # a shell command that puts the banked content of every ``overwritten`` path back
    undo: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


OnPlanned = Callable[[FilesPlan], None]
OtherRuns = list[tuple[str, frozenset[str]]]  # (run id, paths it produced after the anchor)


@dataclass(frozen=True)
class RestoreRequest:
    """One restore (or, with ``dry_run``, its preview) to ``anchor`` (see ``Versioning.restore``)."""

    anchor: BoundaryLabel
    scope: RestoreScope
    protected: tuple[str, ...] = ()  # workspace-relative paths never restored (the workflow sources)
    dry_run: bool = False
    other_runs: tuple[tuple[str, frozenset[str]], ...] = ()  # left in place by a produced scope
    planned: FilesPlan | None = None  # finish this recorded decision instead of deciding anew


@dataclass(frozen=True)
class MissingObject:
    path: str
    digest: str = ""  # the object id, when the mechanism names one


@dataclass(frozen=True)
class UndoBank:
    """What a restore left for its undo (``iterion.rewind.undo.UndoRecord``)."""

    bank: str  # the bank ref (gitrefs) or snapshot id (workspacetrack) the restore took
    anchor: str  # the boundary it restored to
    touched: tuple[str, ...] = ()  # the paths it wrote or removed
    revert_commit: str | None = None  # gitrefs: the revert commit it made


@dataclass
class UndoOutcome:
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}


@dataclass(frozen=True)
class StateChange:
    """One path that differs between two recorded states."""

    path: str
    kind: str  # added | deleted | modified | renamed | copied | typechange | mode_changed

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind}


@dataclass(frozen=True)
class PushState:
    """The commit holding a run's latest recorded state, ready for ``git push`` (checkpoint push).

    ``extra``: what the ``run_workspace_checkpoint`` event records besides (an export's
    snapshot id, tree and skipped paths; empty for a boundary commit)."""

    commit: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tree(self) -> str | None:
        tree = self.extra.get("tree")
        return tree if isinstance(tree, str) else None


DIFF_FILE_CAP = 256 * 1024  # bytes of one file's side shown as text; larger files are summarised
DIFF_TOTAL_CAP = 2 * 1024 * 1024  # characters of one unified diff answer
