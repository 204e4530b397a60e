"""A paused run resumes from its checkpoint or not at all.

The spec lets a *failure* without a checkpoint restart from the workflow entry. A paused run
(waiting for a person, or parked by an operator) is different: it stopped at a known node on
purpose, so a missing checkpoint means the store lost it, and silently restarting from the entry
would re-run everything before that node. Resume refuses instead, with and without answers alike,
before it takes the lock or writes anything.
"""

from __future__ import annotations

from iterion.store import RunStatus, Store
from iterion.store.errors import CorruptDocumentError

PAUSED = frozenset({RunStatus.PAUSED_WAITING_HUMAN, RunStatus.PAUSED_OPERATOR})


class CheckpointMissing(CorruptDocumentError):
    """exit 1 like every damaged-store refusal: the command ran and found the store damaged."""


def require_checkpoint(store: Store, run_id: str, status: RunStatus) -> None:
    if status not in PAUSED or store.has_checkpoint(run_id):
        return
    path = store.paths(run_id).checkpoint_json
    raise CheckpointMissing(
        f"run {run_id} is {status.value} but its checkpoint is gone ({path}): checkpoint missing: "
        "nothing to resume from",
        detail="checkpoint missing",
        hint=f"restore {path.name} from a backup, or start a new run with `iterion run`")
