"""The produced-scope algorithm on a synthetic chain (no git): the rules of the spec."""

from __future__ import annotations

import pytest

from gitrefs.boundary import BoundaryKind as K
from gitrefs.boundary import BoundaryLabel
from gitrefs.produced_scope import ChainEntry, PivotNotRecorded, produced_scope

# state id -> {path: content}
STATES: dict[str, dict[str, str]] = {}


def changed(a: str, b: str) -> set[str]:
    sa, sb = STATES[a], STATES[b]
    return {p for p in sa.keys() | sb.keys() if sa.get(p) != sb.get(p)}


def entry(kind: K, node: str, it: int, state: str) -> ChainEntry:
    return ChainEntry(BoundaryLabel(kind, node, it), state)


def setup_function() -> None:
    STATES.clear()


def test_rewritten_then_restored_file_is_in_scope() -> None:
    STATES.update({"s0": {"a": "1"}, "s1": {"a": "2"}, "s2": {"a": "1"}})
    chain = [entry(K.PRE, "n1", 0, "s0"), entry(K.NODES, "n1", 0, "s1"),
             entry(K.PRE, "n2", 0, "s1"), entry(K.NODES, "n2", 0, "s2")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "n1", 0), changed)
    assert scope.paths == {"a"}
    assert not scope.empty


def test_person_edit_between_pause_and_resume_is_excluded() -> None:
    STATES.update({"s0": {"a": "1"}, "s1": {"a": "2"}, "s2": {"a": "2", "human": "x"},
                   "s3": {"a": "2", "human": "x", "b": "3"}})
    chain = [entry(K.PRE, "n1", 0, "s0"), entry(K.PAUSE, "n1", 0, "s1"),
             entry(K.RESUME, "n1", 0, "s2"), entry(K.NODES, "n1", 0, "s3")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "n1", 0), changed)
    assert scope.paths == {"a", "b"}
    assert scope.idle_paths == {"human"}


def test_person_edit_during_fail_interval_is_excluded() -> None:
    STATES.update({"s0": {}, "s1": {"debris": "1"}, "s2": {"debris": "1", "fix": "y"},
                   "s3": {"debris": "2", "fix": "y"}})
    chain = [entry(K.PRE, "t", 0, "s0"), entry(K.FAIL, "t", 0, "s1"),
             entry(K.RESUME, "t", 0, "s2"), entry(K.NODES, "t", 0, "s3")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "t", 0), changed)
    assert scope.paths == {"debris"}


def test_person_edit_during_pause_then_node_change_is_in_scope() -> None:
    STATES.update({"s0": {"f": "orig"}, "s1": {"f": "orig"}, "s2": {"f": "human"}, "s3": {"f": "node"}})
    chain = [entry(K.PRE, "h", 0, "s0"), entry(K.PAUSE, "h", 0, "s1"),
             entry(K.RESUME, "h", 0, "s2"), entry(K.NODES, "h", 0, "s3")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "h", 0), changed)
    assert scope.paths == {"f"}


def test_empty_scope_is_reported_empty() -> None:
    STATES.update({"s0": {"a": "1"}})
    chain = [entry(K.NODES, "n0", 0, "s0"), entry(K.PRE, "n1", 0, "s0"), entry(K.NODES, "n1", 0, "s0")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "n1", 0), changed)
    assert scope.empty
    assert scope.paths == frozenset()


def test_scope_starts_at_pivot_not_before() -> None:
    STATES.update({"s0": {}, "s1": {"early": "1"}, "s2": {"early": "1", "late": "1"}})
    chain = [entry(K.PRE, "n1", 0, "s0"), entry(K.NODES, "n1", 0, "s1"),
             entry(K.PRE, "n2", 0, "s1"), entry(K.NODES, "n2", 0, "s2")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "n2", 0), changed)
    assert scope.paths == {"late"}


def test_pivot_inside_open_idle_interval_excludes_until_resume() -> None:
    STATES.update({"s0": {}, "s1": {"h": "1"}, "s2": {"h": "1", "n": "1"}})
    chain = [entry(K.FAIL, "a", 0, "s0"), entry(K.PRE, "b", 0, "s0"),
             entry(K.RESUME, "b", 0, "s1"), entry(K.NODES, "b", 0, "s2")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "b", 0), changed)
    assert scope.paths == {"n"}


def test_latest_occurrence_of_pivot_counts() -> None:
    STATES.update({"s0": {}, "s1": {"old": "1"}, "s2": {"old": "1", "new": "1"}})
    chain = [entry(K.PRE, "n", 0, "s0"), entry(K.NODES, "n", 0, "s1"),
             entry(K.PRE, "n", 0, "s1"), entry(K.NODES, "n", 0, "s2")]
    scope = produced_scope(chain, BoundaryLabel(K.PRE, "n", 0), changed)
    assert scope.paths == {"new"}


def test_unknown_pivot_raises() -> None:
    STATES.update({"s0": {}})
    with pytest.raises(PivotNotRecorded):
        produced_scope([entry(K.PRE, "a", 0, "s0")], BoundaryLabel(K.PRE, "zz", 0), changed)


def test_aliases_do_not_call_diff() -> None:
    calls: list[tuple[str, str]] = []

    def counting(a: str, b: str) -> set[str]:
        calls.append((a, b))
        return set()

    chain = [entry(K.NODES, "a", 0, "x"), entry(K.PRE, "b", 0, "x"), entry(K.NODES, "b", 0, "x")]
    produced_scope(chain, BoundaryLabel(K.PRE, "b", 0), counting)
    assert calls == []


def test_label_round_trip_and_bad_ids() -> None:
    label = BoundaryLabel.parse("resume:build_step:3")
    assert label == BoundaryLabel(K.RESUME, "build_step", 3)
    assert str(label) == "resume:build_step:3"
    with pytest.raises(ValueError, match="':'"):
        BoundaryLabel(K.PRE, "a:b", 0)
    with pytest.raises(ValueError, match="unknown kind"):
        BoundaryLabel.parse("post:a:0")


def test_recorded_paths_spans_the_whole_chain_without_idle_intervals_or_repeated_labels() -> None:
    from gitrefs.produced_scope import recorded_paths

    STATES.update({"s0": {}, "s1": {"mine": "1"}, "s2": {"mine": "1", "person": "p"},
                   "s3": {"mine": "1", "person": "p", "later": "2"}, "s4": {"later": "2", "person": "p"}})
    # pre:n1 repeats (a replay after a rewind): the whole chain still counts, not just from the repeat
    chain = [entry(K.PRE, "n1", 0, "s0"), entry(K.NODES, "n1", 0, "s1"), entry(K.PAUSE, "g", 0, "s1"),
             entry(K.RESUME, "g", 0, "s2"), entry(K.NODES, "g", 0, "s3"), entry(K.PRE, "n1", 0, "s3"),
             entry(K.NODES, "n1", 0, "s4")]
    assert recorded_paths(chain, changed) == {"mine", "later"}  # `person` changed while parked
    # narrowed to the intervals ending at s3 or later
    assert recorded_paths(chain, changed, counts=lambda a, b: b.state >= "s3") == {"later", "mine"}
    assert recorded_paths(chain, changed, counts=lambda a, b: b.state == "s3") == {"later"}
    assert recorded_paths([], changed) == frozenset()


def test_other_runs_paths_names_the_last_run_that_produced_each_path() -> None:
    from gitrefs.produced_scope import other_runs_paths

    others = [("r1", frozenset({"a", "b"})), ("r2", frozenset({"b", "c"}))]
    assert other_runs_paths({"a", "b", "mine"}, others) == {"a": "r1", "b": "r2"}
    assert other_runs_paths(set(), others) == {}
