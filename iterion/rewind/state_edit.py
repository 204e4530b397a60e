"""Moving the checkpoint and the run document back onto the pivot (the logical part of a rewind).

Dropped: the invalidated nodes' outputs (and the history entries of the executions undone),
their backend sessions, their artifact versions (tombstoned - the files stay on disk), their
subbot child pointers (released, reported as orphaned), the pending interaction and its
recovery marker. Kept on purpose: budget accounting, loop counters, visit counters, round-robin
positions, artifact version counters, recovery-attempt counters - refunding any of them would
make rewind-then-resume a way around the caps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from iterion.store.artifacts import ArtifactDoc
from iterion.store.checkpoint import AnchorReason, Checkpoint
from iterion.store.run_doc import RunDoc
from iterion.store.status import RunStatus


@dataclass
class CheckpointRewind:
    pivot: str
    restart_iteration: int
    undone: Counter[str]  # node -> executions removed from the executed order
    tombstoned: dict[str, list[int]] = field(default_factory=dict)  # artifact -> versions


def last_execution(cp: Checkpoint, node: str) -> tuple[int, int] | None:
    """(index in the executed order, iteration) of ``node``'s latest execution, or None."""
    for i in range(len(cp.executed) - 1, -1, -1):
        if cp.executed[i].node == node:
            return i, cp.executed[i].iteration
    return None


def executed_nodes(cp: Checkpoint) -> list[str]:
    return [e.node for e in cp.executed]


@dataclass(frozen=True)
class Anchor:
    """Which execution of the pivot the rewind goes back to."""

    node: str
    iteration: int  # the files anchor is pre:<node>:<iteration>
    start: int  # index in the executed order from which dropped nodes' executions are undone
    attempt: bool  # the run stopped inside this execution (it started and never completed)


# Anchors whose restart node was necessarily started: it failed, or parked on a question.
_STARTED_ANCHORS = frozenset({AnchorReason.FAILURE, AnchorReason.HUMAN_PAUSE, AnchorReason.RECOVERY_PAUSE})


def current_attempt(cp: Checkpoint, pre_iterations: dict[str, set[int]] | None) -> Anchor | None:
    """The execution the run stopped inside (failed, parked, interrupted), if it started.

    ``pre_iterations`` (node -> iterations with a recorded ``pre:`` boundary) proves the start;
    without it (the workspace cannot be read) the checkpoint's anchor reason decides.
    """
    node = cp.restart_node
    if not node:
        return None
    it = cp.node_visits.get(node, 0)
    started = (it in pre_iterations.get(node, set())) if pre_iterations is not None else (
        cp.anchor_reason in _STARTED_ANCHORS)
    return Anchor(node, it, len(cp.executed), attempt=True) if started else None


def resolve_anchor(cp: Checkpoint, pivot: str, attempt: Anchor | None,
                   pre_iterations: dict[str, set[int]] | None) -> Anchor | None:
    """The pivot's execution to go back to: the one the run stopped inside, else its latest
    completed one, else (a repeated rewind) the anchor the previous rewind restored; None if the
    pivot never started."""
    if attempt is not None and attempt.node == pivot:
        return attempt
    last = last_execution(cp, pivot)
    if last is not None:
        return Anchor(pivot, last[1], last[0], attempt=False)
    if cp.anchor_reason is AnchorReason.REWIND and pivot == cp.restart_node and pre_iterations:
        its = pre_iterations.get(pivot)
        if its:
            return Anchor(pivot, max(its), len(cp.executed), attempt=True)
    return None


def rewind_checkpoint(cp: Checkpoint, anchor: Anchor, dropped: Collection[str],
                      artifacts: Iterable[ArtifactDoc] = (),
                      predecessors: Collection[str] = ()) -> CheckpointRewind:
    """Mutate ``cp`` so the next resume re-executes ``anchor.node``; ``artifacts`` are the run's
    published docs."""
    pivot, start, iteration = anchor.node, anchor.start, anchor.iteration
    # Executions from the pivot's latest one onward are undone when their node is dropped; the
    # survivors (a loop partner that reaches the pivot back) keep theirs.
    kept = cp.executed[:start] + [e for e in cp.executed[start:] if e.node not in dropped]
    undone = Counter(e.node for e in cp.executed[start:] if e.node in dropped)
    cp.executed = kept
    # Who routed into the pivot's undone execution: the latest earlier execution of one of its
    # predecessors (None, like a convergence, when there is none). An interrupted attempt keeps
    # the engine's own record.
    came_from = cp.came_from if anchor.attempt and pivot == cp.restart_node else next(
        (e.node for e in reversed(cp.executed[:start]) if e.node in predecessors), None)
    for node in dropped:
        cp.outputs.pop(node, None)
        cp.backend_sessions.pop(node, None)
        if node != pivot:
            # its `with {}` input came from a dropped upstream output; the replay maps it afresh
            cp.node_inputs.pop(node, None)
        if node in cp.history and undone[node]:
            cp.history[node] = cp.history[node][: max(0, len(cp.history[node]) - undone[node])]
    # Visit counters are not refunded, so the replay carries the engine's next iteration for the
    # pivot (an interrupted attempt never completed: its own); the files anchor stays
    # pre:<pivot>:<iteration undone>.
    restart_iteration = max(cp.node_visits.get(pivot, 0), iteration if anchor.attempt else iteration + 1)
    result = CheckpointRewind(pivot=pivot, restart_iteration=restart_iteration, undone=undone)
    result.tombstoned = _tombstone(cp, undone, artifacts)
    cp.restart_node = pivot
    cp.restart_iteration = restart_iteration
    cp.anchor_reason = AnchorReason.REWIND
    cp.came_from = came_from
    cp.pending_interaction = None
    cp.recovery_pause = False
    cp.recovery_code = None
    return result


def _tombstone(cp: Checkpoint, undone: Counter[str],
               artifacts: Iterable[ArtifactDoc]) -> dict[str, list[int]]:
    """Tombstone, per undone node, its newest live versions - one per undone execution."""
    by_node: dict[str, list[ArtifactDoc]] = {}
    for doc in artifacts:
        if doc.node is not None and doc.node in undone:
            by_node.setdefault(doc.node, []).append(doc)
    out: dict[str, list[int]] = {}
    for node, docs in by_node.items():
        live = [d for d in docs if d.version not in cp.tombstoned_artifacts.get(d.name, ())]
        live.sort(key=lambda d: (d.created_at, d.version))
        for doc in live[-undone[node]:]:
            cp.tombstone_artifact(doc.name, doc.version)
            out.setdefault(doc.name, []).append(doc.version)
    return {name: sorted(vs) for name, vs in sorted(out.items())}


def park_run(doc: RunDoc, dropped: Collection[str]) -> dict[str, str]:
    """Park ``doc`` at the rewound checkpoint; return the released subbot children (node -> run)."""
    orphaned = {n: doc.subbot_children.pop(n) for n in sorted(dropped) if n in doc.subbot_children}
    if doc.status is not RunStatus.PAUSED_OPERATOR:
        doc.set_status(RunStatus.PAUSED_OPERATOR)
    # The old verdict no longer describes the run: it is ready at the chosen checkpoint.
    doc.failure_code = None
    doc.error = None
    doc.finished_at = None
    # Only a real resume request may continue it (a queued delivery must not auto-resume it).
    doc.explicit_resume_required = True
    return orphaned
