"""A checkpoint copies what was recorded since the last one (issue 13 point 5), yet each is
what a whole deep copy of the state gives: equal content, no object shared with the live state,
right again after the history is replaced (a resume's state) or shortened."""

from __future__ import annotations

import copy
from typing import Any

from iterion.budget import Usage
from iterion.engine.state import RunState, from_checkpoint, to_checkpoint
from iterion.store.checkpoint import AnchorReason, Checkpoint


def _cp(state: RunState) -> Checkpoint:
    return to_checkpoint(state, usage=Usage(), anchor=AnchorReason.NODE_BOUNDARY, restart_node="n",
                         restart_iteration=0)


def _whole(state: RunState) -> dict[str, Any]:
    """What the checkpoint holds when built from a fresh deep copy of the state (no memo)."""
    fresh = RunState(run_id=state.run_id)
    fresh.history = copy.deepcopy(state.history)
    fresh.executed = list(state.executed)
    fresh.visits = dict(state.visits)
    fresh.outputs = copy.deepcopy(state.outputs)
    return _content(_cp(fresh))


def _content(cp: Checkpoint) -> dict[str, Any]:
    return cp.model_dump(exclude={"written_at"})


def test_each_checkpoint_equals_a_whole_copy_and_shares_nothing_with_the_state() -> None:
    state = RunState(run_id="r")
    seen: list[Checkpoint] = []
    for i in range(12):
        node = ("a", "b")[i % 2]
        state.record_output(node, i // 2, {"i": i, "nested": {"items": [i, [i]]}}, in_loop=True)
        cp = _cp(state)
        assert _content(cp) == _whole(state)
        seen.append(cp)
    for node, entries in state.history.items():
        for live, kept in zip(entries, seen[-1].history[node], strict=True):
            assert live == kept and live is not kept and live["nested"] is not kept["nested"]
    # earlier checkpoints kept what they had: later ones appended to copies, never to theirs
    assert [len(c.executed) for c in seen] == list(range(1, 13))
    assert [len(c.history["a"]) for c in seen] == [(i + 2) // 2 for i in range(12)]

    resumed = from_checkpoint(seen[5])  # a new state from a checkpoint: its lists are new ones
    resumed.record_output("a", 9, {"i": 99, "nested": {"items": []}}, in_loop=True)
    assert _content(_cp(resumed)) == _whole(resumed)

    state.history["a"] = state.history["a"][:2]  # replaced by a shorter list
    state.executed = state.executed[:3]
    assert _content(_cp(state)) == _whole(state)
    state.executed = [("z", 0), *state.executed[1:]]  # same length, another first record
    assert _content(_cp(state)) == _whole(state)
