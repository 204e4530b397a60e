"""The checkpoint (``runs/<run>/checkpoint.json``): the authoritative execution state.

A resume restarts at ``restart_node`` with everything here restored; events are never replayed.
Fields added after the first format load with empty/zero defaults (docs/technical/durability.md
section 6): legacy checkpoints without accounting resume with a fresh budget.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gitrefs.persist import VersionedModel
from iterion.budget import Usage
from iterion.store.timeutil import utcnow


class AnchorReason(StrEnum):
    """Why the checkpoint's restart node is what it is."""

    NODE_BOUNDARY = "node_boundary"      # best-effort checkpoint after a successful node
    FAILURE = "failure"                  # anchored at the failing node; resume re-executes it
    RESUMABLE_FAIL = "resumable_fail"    # a resumable fail node: anchored on its guard predecessor
    CANCEL = "cancel"                    # the node that was about to execute
    OPERATOR_PAUSE = "operator_pause"    # the node that was about to execute
    HUMAN_PAUSE = "human_pause"          # the human node / the agent that asked
    RECOVERY_PAUSE = "recovery_pause"    # recovery dispatcher parked a failed node for a person
    REWIND = "rewind"                    # moved back by `iterion rewind`
    ENTRY = "entry"                      # nothing executed yet


class ExecutedNode(BaseModel):
    model_config = ConfigDict(extra="ignore")

    node: str
    iteration: int = 0


InteractionKind = Literal["human", "ask_user", "recovery"]


class PendingInteraction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    node: str
    iteration: int = 0
    kind: InteractionKind = "human"
    questions: dict[str, Any] = Field(default_factory=dict)


class Checkpoint(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    run_id: str = ""
    restart_node: str | None = None
    restart_iteration: int = 0
    anchor_reason: AnchorReason = AnchorReason.NODE_BOUNDARY
    # node id -> its latest output; node id -> every iteration's output (nodes inside loops)
    outputs: dict[str, Any] = Field(default_factory=dict)
    history: dict[str, list[Any]] = Field(default_factory=dict)
    node_visits: dict[str, int] = Field(default_factory=dict)
    node_iterations: dict[str, int] = Field(default_factory=dict)
    executed: list[ExecutedNode] = Field(default_factory=list)  # in execution order
    loop_counters: dict[str, int] = Field(default_factory=dict)
    loop_previous: dict[str, Any] = Field(default_factory=dict)
    loop_current: dict[str, Any] = Field(default_factory=dict)
    # the closing edge's source output at the last crossing (loop_previous is the one before)
    loop_crossed: dict[str, Any] = Field(default_factory=dict)
    round_robin: dict[str, int] = Field(default_factory=dict)
    artifact_versions: dict[str, int] = Field(default_factory=dict)
    tombstoned_artifacts: dict[str, list[int]] = Field(default_factory=dict)
    vars: dict[str, Any] = Field(default_factory=dict)
    # node id -> failure code -> attempts so far (survives pauses: a second failure is attempt 2)
    recovery_attempts: dict[str, dict[str, int]] = Field(default_factory=dict)
    pending_interaction: PendingInteraction | None = None
    backend_sessions: dict[str, str] = Field(default_factory=dict)  # node id -> backend session id
    # engine additions: the `with {}` input mapped to a node for its next execution, and the node
    # whose edge routed into restart_node (a resumable fail node's guard; None at the entry)
    node_inputs: dict[str, Any] = Field(default_factory=dict)
    came_from: str | None = None
    recovery_pause: bool = False
    recovery_code: str | None = None
    accounting: Usage = Field(default_factory=Usage)
    written_at: datetime = Field(default_factory=utcnow)

    @field_validator("accounting", mode="before")
    @classmethod
    def _null_accounting(cls, v: Any) -> Any:
        return Usage() if v is None else v

    # -- helpers the engine and rewind share ------------------------------------------------------
    def record_executed(self, node: str, iteration: int) -> None:
        self.executed.append(ExecutedNode(node=node, iteration=iteration))
        self.node_visits[node] = self.node_visits.get(node, 0) + 1
        self.node_iterations[node] = iteration

    def set_output(self, node: str, output: Any, *, in_loop: bool = False) -> None:
        self.outputs[node] = output
        if in_loop:
            self.history.setdefault(node, []).append(output)

    def first_execution_index(self, node: str) -> int | None:
        """Position of ``node``'s earliest execution (rewind's "earliest executed"), else None."""
        for i, entry in enumerate(self.executed):
            if entry.node == node:
                return i
        return None

    def bump_recovery_attempt(self, node: str, code: str) -> int:
        per_node = self.recovery_attempts.setdefault(node, {})
        per_node[code] = per_node.get(code, 0) + 1
        return per_node[code]

    def recovery_attempt(self, node: str, code: str) -> int:
        return self.recovery_attempts.get(node, {}).get(code, 0)

    def tombstone_artifact(self, name: str, version: int) -> None:
        versions = self.tombstoned_artifacts.setdefault(name, [])
        if version not in versions:
            versions.append(version)
            versions.sort()

    def live_artifact_version(self, name: str) -> int | None:
        """The newest version of ``name`` counted here that is not tombstoned."""
        dead = set(self.tombstoned_artifacts.get(name, ()))
        for v in range(self.artifact_versions.get(name, 0), 0, -1):
            if v not in dead:
                return v
        return None
