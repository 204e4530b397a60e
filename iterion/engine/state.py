"""The in-memory state of a run: everything a checkpoint must restore, and nothing else."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from iterion.budget import Usage
from iterion.store.checkpoint import (
    AnchorReason,
    Checkpoint,
    ExecutedNode,
    InteractionKind,
    PendingInteraction,
)


@dataclass
class LoopState:
    iteration: int = 0                          # times a closing edge of the loop was taken
    # docs/language.md §3 (Loops): "the loop-edge source's output at the PREVIOUS crossing (empty before the
    # second crossing)": the output crossed the time before last, not the one just crossed
    previous_output: dict[str, Any] | None = None
    crossed_output: dict[str, Any] | None = None   # the closing edge's source output when last taken
    current_output: dict[str, Any] | None = None   # that source's latest output in this iteration


@dataclass
class Pending:
    """A question a node is waiting on (human gate, ask_user or recovery)."""

    interaction_id: str
    node: str
    iteration: int
    kind: InteractionKind
    questions: dict[str, Any]


@dataclass
class Accounting:
    tokens: int = 0
    cost_usd: float = 0.0
    iterations: int = 0
    active_s: float = 0.0


@dataclass
class RunState:
    run_id: str
    vars: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # `with {}` data for a node's next execution
    visits: dict[str, int] = field(default_factory=dict)  # completed executions per node
    executed: list[tuple[str, int]] = field(default_factory=list)
    loops: dict[str, LoopState] = field(default_factory=dict)
    round_robin: dict[str, int] = field(default_factory=dict)
    artifact_versions: dict[str, int] = field(default_factory=dict)
    artifact_values: dict[str, Any] = field(default_factory=dict)
    recovery_attempts: dict[str, dict[str, int]] = field(default_factory=dict)
    tombstoned_artifacts: dict[str, list[int]] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    pending: Pending | None = None
    # where the next execution starts (None once the run reached a terminal)
    next_node: str | None = None
    next_iteration: int = 0
    # the node whose edge routed into ``next_node`` (None at the entry or after a convergence)
    came_from: str | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    # What ``to_checkpoint`` copied before: history entries and executed records are only ever
    # appended (record_output), so each checkpoint copies what was added since, not the whole
    # run again (issue 13 point 5: a loop's per-node cost must not grow with its length).
    # Keyed by the very list copied: a list replaced or shortened is copied afresh.
    _history_copies: dict[str, tuple[list[dict[str, Any]], list[Any]]] = field(
        default_factory=dict, repr=False, compare=False)
    _executed_copies: list[ExecutedNode] = field(default_factory=list, repr=False, compare=False)

    def iteration_of(self, node: str) -> int:
        """The iteration number the node's NEXT execution carries (0-based)."""
        return self.visits.get(node, 0)

    def loop(self, name: str) -> LoopState:
        return self.loops.setdefault(name, LoopState())

    def record_output(self, node: str, iteration: int, output: dict[str, Any], *, in_loop: bool) -> None:
        with self.lock:
            self.outputs[node] = output
            if in_loop:
                self.history.setdefault(node, []).append(output)
            self.visits[node] = max(self.visits.get(node, 0), iteration + 1)
            self.executed.append((node, iteration))


def to_checkpoint(state: RunState, *, usage: Usage, anchor: AnchorReason, restart_node: str | None,
                  restart_iteration: int, recovery_code: str | None = None) -> Checkpoint:
    """Everything the checkpoint model defines, from the in-memory state (under its lock)."""
    with state.lock:
        pending = None
        if state.pending is not None:
            p = state.pending
            pending = PendingInteraction(id=p.interaction_id, node=p.node, iteration=p.iteration, kind=p.kind,
                                         questions=p.questions)
        return Checkpoint(
            run_id=state.run_id,
            restart_node=restart_node,
            restart_iteration=restart_iteration,
            anchor_reason=anchor,
            outputs=copy.deepcopy(state.outputs),
            history=_copied_history(state),
            node_visits=dict(state.visits),
            node_iterations={n: v - 1 for n, v in state.visits.items() if v > 0},
            executed=_copied_executed(state),
            loop_counters={k: v.iteration for k, v in state.loops.items()},
            loop_previous={k: v.previous_output for k, v in state.loops.items() if v.previous_output is not None},
            loop_current={k: v.current_output for k, v in state.loops.items() if v.current_output is not None},
            loop_crossed={k: v.crossed_output for k, v in state.loops.items() if v.crossed_output is not None},
            round_robin=dict(state.round_robin),
            artifact_versions=dict(state.artifact_versions),
            tombstoned_artifacts={k: list(v) for k, v in state.tombstoned_artifacts.items()},
            vars=copy.deepcopy(state.vars),
            recovery_attempts=copy.deepcopy(state.recovery_attempts),
            pending_interaction=pending,
            backend_sessions=dict(state.sessions),
            recovery_pause=anchor is AnchorReason.RECOVERY_PAUSE,
            recovery_code=recovery_code,
            accounting=usage,
            node_inputs=copy.deepcopy(state.inputs),
            came_from=state.came_from,
        )


def _copied_history(state: RunState) -> dict[str, list[Any]]:
    """A deep copy of ``state.history`` that deep-copies only the entries appended since the
    last call (entries are never changed once recorded; the copies are never changed either:
    checkpoints are written, not edited in place - a rewind slices a new list)."""
    memo = state._history_copies
    out: dict[str, list[Any]] = {}
    for node, entries in state.history.items():
        known = memo.get(node)
        copied = known[1] if known is not None and known[0] is entries and len(known[1]) <= len(entries) else []
        copied.extend(copy.deepcopy(e) for e in entries[len(copied):])
        memo[node] = (entries, copied)
        out[node] = list(copied)
    for node in memo.keys() - state.history.keys():
        del memo[node]
    return out


def _copied_executed(state: RunState) -> list[ExecutedNode]:
    """``state.executed`` as checkpoint records, building only those appended since the last call."""
    made, done = state._executed_copies, state.executed
    if made and (len(made) > len(done) or (made[0].node, made[0].iteration) != done[0]
                 or (made[-1].node, made[-1].iteration) != done[len(made) - 1]):
        made.clear()  # replaced or shortened (its first or last known record differs): rebuild
    made.extend(ExecutedNode(node=n, iteration=i) for n, i in done[len(made):])
    return list(made)


def from_checkpoint(cp: Checkpoint) -> RunState:
    state = RunState(run_id=cp.run_id)
    state.vars = copy.deepcopy(cp.vars)
    state.outputs = copy.deepcopy(cp.outputs)
    state.history = copy.deepcopy(cp.history)
    state.inputs = copy.deepcopy(cp.node_inputs)
    state.visits = dict(cp.node_visits)
    state.executed = [(e.node, e.iteration) for e in cp.executed]
    names = set(cp.loop_counters) | set(cp.loop_previous) | set(cp.loop_current) | set(cp.loop_crossed)
    # a checkpoint written before loop_crossed existed kept the last crossing in loop_previous
    crossed = cp.loop_crossed if "loop_crossed" in cp.model_fields_set else cp.loop_previous
    state.loops = {n: LoopState(iteration=cp.loop_counters.get(n, 0), previous_output=cp.loop_previous.get(n),
                                crossed_output=crossed.get(n), current_output=cp.loop_current.get(n))
                   for n in names}
    state.round_robin = dict(cp.round_robin)
    state.artifact_versions = dict(cp.artifact_versions)
    state.tombstoned_artifacts = {k: list(v) for k, v in cp.tombstoned_artifacts.items()}
    state.recovery_attempts = copy.deepcopy(cp.recovery_attempts)
    state.sessions = dict(cp.backend_sessions)
    if cp.pending_interaction is not None:
        p = cp.pending_interaction
        state.pending = Pending(p.id, p.node, p.iteration, p.kind, dict(p.questions))
    state.next_node = cp.restart_node
    state.next_iteration = cp.restart_iteration
    state.came_from = cp.came_from
    return state
