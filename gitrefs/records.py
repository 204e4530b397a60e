"""What gitrefs persists (pydantic, versioned) and what its operations return (plain records)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gitrefs.boundary import BoundaryLabel
from gitrefs.persist import VersionedModel

# --- persisted under <commondir>/iterion/runs/<run>/ ---------------------------------------

class RunRecord(VersionedModel):
    """run.json: written once by RunRefs.start."""

    run_id: str
    base: str | None  # None: the workspace's HEAD was unborn when the run started
    started_at: str


class PushAttempt(VersionedModel):
    sequence: int
    remote: str
    ref: str
    commit: str
    time: str
    ok: bool
    error: str | None = None


class PushLog(VersionedModel):
    """pushes.json: every push attempt, in order; the latest ok one is the recovery point."""

    attempts: list[PushAttempt] = []

    def latest_success(self) -> PushAttempt | None:
        for attempt in reversed(self.attempts):
            if attempt.ok:
                return attempt
        return None


# --- returned by operations ----------------------------------------------------------------

def _jsonable(value: Any) -> Any:
    if isinstance(value, BoundaryLabel):
        return str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items) if isinstance(value, (set, frozenset)) else items
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


class _Jsonable:
    def to_json(self) -> dict[str, Any]:
        return _jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class BoundaryRecord(_Jsonable):
    """One boundary. For ``pre`` the commit is the previous boundary's (an alias)."""

    label: BoundaryLabel
    ref: str
    commit: str
    tree: str


@dataclass(frozen=True)
class BankRecord(_Jsonable):
    node: str
    seq: int
    ref: str
    commit: str
    tree: str


class RevertPlan(VersionedModel):
    """A revert prepared (bank taken, revert commit created) but not yet applied: what a
    rewind's intent record holds so a killed apply can be finished (``RunRefs.apply_revert``)."""

    label: str                  # the boundary reverted to, e.g. pre:build:0
    target_commit: str
    target_tree: str
    bank: dict[str, Any]        # the BankRecord's fields
    old_head: str | None        # HEAD when the revert was prepared (None: unborn)
    revert_commit: str


@dataclass(frozen=True)
class RevertResult(_Jsonable):
    label: BoundaryLabel
    target_commit: str
    revert_commit: str
    bank: BankRecord
    restored: tuple[str, ...]   # written back (created or changed) in the working tree
    removed: tuple[str, ...]    # deleted from the working tree
    skipped: tuple[str, ...]    # could not be restored (submodule content, blocked paths)
    chain_commit: str = ""      # the chain step recording the reverted tree (the new chain head)


@dataclass(frozen=True)
class PushRecord(_Jsonable):
    sequence: int
    remote: str
    ref: str
    commit: str
    time: str


@dataclass(frozen=True)
class RecoveryHint(_Jsonable):
    ref: str
    commit: str
    sequence: int
    time: str
    remote: str
    fetch_command: str
    verify_command: str
    verify: str
    source: str = "run_workspace_checkpoint"


@dataclass(frozen=True)
class BankRestoreResult(_Jsonable):
    restored: bool
    reason: str | None
    branch: str | None
    head: str
    base: str
