"""What iterion's Python API returns: frozen dataclasses of our own, never the store's documents.

They are snapshots read from the run store when the call returns; read again
(``iterion.inspect``) for a later state. Field names follow ``iterion inspect --json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iterion.api.errors import RunFailedError
from iterion.store.status import RunStatus

if TYPE_CHECKING:
    from iterion.engine.result import RunResult


@dataclass(frozen=True)
class Field:
    """One field a paused human node asks for: ``name``, its ``type`` and, for an enum, ``choices``."""

    name: str
    type: str = "string"
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question:
    """What a run paused on a person waits for (``Run.question``); answer it with ``resume(answers=...)``."""

    node: str
    kind: str  # human, ask_user, recovery
    text: str | None  # the node's instructions or question, as the person reads it
    fields: tuple[Field, ...] = ()

    @classmethod
    def of(cls, node: str, kind: str, questions: Mapping[str, Any]) -> Question:
        text = questions.get("instructions") or questions.get("question")
        fields = tuple(Field(str(f.get("name")), str(f.get("type") or "string"),
                             tuple(str(c) for c in f.get("enum") or ()))
                       for f in questions.get("fields") or [] if isinstance(f, Mapping))
        return cls(node=node, kind=kind, text=str(text).strip() if text else None, fields=fields)


@dataclass(frozen=True)
class Run:
    """One run as the store holds it when the call returned."""

    id: str
    name: str
    status: RunStatus
    workflow: str
    failure_code: str | None = None
    error: str | None = None
    checkpoint_node: str | None = None  # where a resume continues (None: no checkpoint yet)
    question: Question | None = None  # set when status is paused_waiting_human
    outputs: Mapping[str, Any] = field(default_factory=dict)  # node id -> its latest output
    executed: tuple[str, ...] = ()  # "node:iteration", in order
    workspace: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    final_branch: str | None = None
    final_commit: str | None = None
    merged_into: str | None = None  # set by run/resume when a worktree run fast-forwarded a branch
    stored_in: Path | None = None  # the run's directory in the store
    # a human pause's questions as the engine reports them ({"interaction_id", "node", "kind",
    # "instructions"/"question", "fields"}); ``question`` is the typed reading of the same
    pending: Mapping[str, Any] | None = None
    # what the engine returned to run/resume (None from inspect): ``result.to_json()`` is what
    # `iterion run --json` prints
    result: RunResult | None = field(default=None, repr=False, compare=False)
    file: str | None = None  # the workflow source the run recorded
    mode: str = ""  # the workspace mode: in_place or worktree
    created_at: datetime | None = None
    ended_at: datetime | None = None  # None while the run can go on
    # set by ``inspect``: every field of `iterion inspect --run-id R --json` (boundaries, rewinds,
    # budget caps and consumption, timing, live process groups, a pushed workspace checkpoint...)
    # but ``continue_with``, the CLI's command line
    detail: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    interrupted_rewind: str | None = None  # set by ``inspect``: a killed rewind, one line (finish it: ``rewind``)

    @property
    def parked(self) -> bool:
        """Stopped with a checkpoint that ``resume`` continues from (a question, a failure, a cancel)."""
        return self.status.is_parked

    @property
    def done(self) -> bool:
        """Finished or failed for good: no resume continues it."""
        return self.status.is_terminal

    def raise_for_status(self) -> Run:
        """Raise ``RunFailedError`` if the run failed, failed resumably or was cancelled; else return it."""
        if self.status in (RunStatus.FAILED, RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED):
            raise RunFailedError(self)
        return self


@dataclass(frozen=True)
class RunSummary:
    """A run as the run list shows it. A run whose document cannot be read is listed, never
    hidden: ``status`` None and ``corrupt`` naming the damage."""

    id: str
    name: str
    status: RunStatus | None
    workflow: str
    created_at: datetime | None
    failure_code: str | None = None
    corrupt: str | None = None


@dataclass(frozen=True)
class RewindReport:
    """What a rewind did (or, with ``dry_run``, would do)."""

    run_id: str
    from_node: str | None  # where the checkpoint stood
    to_node: str  # the node the next resume replays from
    dropped_nodes: tuple[str, ...]
    status: str  # the run's status after the rewind (paused_operator)
    dry_run: bool
    restored: tuple[str, ...] = ()  # workspace files written back
    removed: tuple[str, ...] = ()  # workspace files deleted (absent at the anchor)
    left_in_place: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)  # the whole report, as `rewind --json` prints it


@dataclass(frozen=True)
class ControlReport:
    """What ``pause`` or ``cancel`` did: the run's status when the call returned, and how the
    request was delivered: ``"direct"`` (no process executed the run: its status moved here),
    ``"requested"`` (its process acted on it) or ``"pending"`` (asked; not acted on yet)."""

    run_id: str
    action: str  # pause | cancel
    status: RunStatus
    delivered: str
    checkpoint_node: str | None = None  # where a resume continues
    message: str = ""  # why it is still pending, or what the run did instead


@dataclass(frozen=True)
class UndoReport:
    """What undoing the last rewind of a run put back."""

    run_id: str
    to_node: str  # the node the undone rewind had moved the checkpoint to
    checkpoint_node: str | None  # where the checkpoint is back at
    status: str  # the run's status after the undo
    restored: tuple[str, ...] = ()  # workspace files put back
    removed: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)  # as `rewind --undo --json` prints it
