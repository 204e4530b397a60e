"""Invalidation, fan-out promotion and --auto pivot selection on hand-built IR graphs."""

from __future__ import annotations

import pytest
from .rewind_graphs import build

from iterion.rewind.auto import select_pivot
from iterion.rewind.errors import AutoRefusedError, UnknownNodeError
from iterion.rewind.invalidation import in_execution_order, invalidated_nodes
from iterion.rewind.promotion import promote


# --- invalidation -------------------------------------------------------------------------

def test_linear_chain_drops_pivot_and_everything_after() -> None:
    wf = build("a", [("a", "b"), ("b", "c"), ("c", "d"), ("d", "done")])
    assert invalidated_nodes(wf, "c") == {"c", "d"}
    assert invalidated_nodes(wf, "a") == {"a", "b", "c", "d"}
    assert invalidated_nodes(wf, "d") == {"d"}


def test_loop_partner_that_reaches_the_pivot_back_survives() -> None:
    # implement -> verify -> implement as fix(3): verify is downstream AND upstream of implement
    wf = build("plan", [("plan", "implement"), ("implement", "verify"), ("verify", "implement"),
                        ("verify", "ship"), ("ship", "done")])
    assert invalidated_nodes(wf, "implement") == {"implement", "ship"}
    # rewinding verify: implement reaches verify back, so it survives too
    assert invalidated_nodes(wf, "verify") == {"verify", "ship"}
    # rewinding before the loop drops the whole loop
    assert invalidated_nodes(wf, "plan") == {"plan", "implement", "verify", "ship"}


def test_loop_downstream_of_the_pivot_is_dropped_whole() -> None:
    wf = build("a", [("a", "b"), ("b", "c"), ("c", "b"), ("c", "done")])
    assert invalidated_nodes(wf, "a") == {"a", "b", "c"}


def test_nodes_on_a_parallel_path_not_downstream_survive() -> None:
    # a -> x -> d and a -> y -> d (condition router a): rewinding x keeps y
    wf = build("a", [("a", "x"), ("a", "y"), ("x", "d"), ("y", "d"), ("d", "done")])
    assert invalidated_nodes(wf, "x") == {"x", "d"}


def test_unknown_pivot_names_the_known_nodes() -> None:
    wf = build("a", [("a", "b"), ("b", "done")])
    with pytest.raises(UnknownNodeError) as err:
        invalidated_nodes(wf, "nope")
    assert "nope" in err.value.message and "a, b" in (err.value.hint or "")


def test_execution_order_for_reports() -> None:
    assert in_execution_order({"c", "a", "z", "b"}, ["a", "b", "a", "c"]) == ["a", "b", "c", "z"]
    # never-executed nodes follow in graph order, not by name
    wf = build("a", [("a", "z"), ("z", "b"), ("b", "done")])
    assert in_execution_order({"b", "z", "a"}, ["a"], wf) == ["a", "z", "b"]


# --- promotion ----------------------------------------------------------------------------

def fan_out_graph():
    # entry -> r (fan_out_all) -> [b1 -> b2] and [c1] -> j -> done
    return build("entry", [("entry", "r"), ("r", "b1"), ("b1", "b2"), ("r", "c1"), ("b2", "j"), ("c1", "j"),
                           ("j", "done")],
                 fan_outs={"r": (("b1", "b2"), ("c1",))}, joins={"r": "j"})


def test_body_node_is_promoted_to_its_router() -> None:
    wf = fan_out_graph()
    p = promote(wf, "b2")
    assert (p.pivot, p.promoted_from, p.promoted) == ("r", "b2", True)
    # the whole fan-out replays: every branch and the join are dropped
    assert invalidated_nodes(wf, p.pivot) == {"r", "b1", "b2", "c1", "j"}


def test_nodes_outside_a_body_are_not_promoted() -> None:
    wf = fan_out_graph()
    for n in ("entry", "r", "j"):
        p = promote(wf, n)
        assert (p.pivot, p.promoted_from) == (n, None)


@pytest.mark.parametrize("transitive", [True, False])
def test_nested_fan_out_promotes_to_the_outermost_router(transitive: bool) -> None:
    # outer -> [inner -> (x | y) -> ij] and [z] -> oj
    outer_body = ("inner", "x", "y", "ij") if transitive else ("inner", "ij")
    wf = build("s", [("s", "outer"), ("outer", "inner"), ("inner", "x"), ("inner", "y"), ("x", "ij"), ("y", "ij"),
                     ("ij", "oj"), ("outer", "z"), ("z", "oj"), ("oj", "done")],
               fan_outs={"outer": (outer_body, ("z",)), "inner": (("x",), ("y",))},
               joins={"outer": "oj", "inner": "ij"})
    assert promote(wf, "x").pivot == promote(wf, "y").pivot
    p = promote(wf, "x")
    assert (p.pivot, p.promoted_from) == ("outer", "x")
    assert promote(wf, "inner").pivot == "outer"
    assert promote(wf, "oj").pivot == "oj"


# --- --auto selection ---------------------------------------------------------------------

def test_single_impacted_node() -> None:
    wf = build("a", [("a", "b"), ("b", "c"), ("c", "d"), ("d", "done")])
    sel = select_pivot(wf, {"c": ["prompt c_user changed"]}, ["a", "b", "c", "d"])
    assert sel.pivot == "c"
    assert [c.node for c in sel.candidates] == ["c"] and sel.candidates[0].reasons == ("prompt c_user changed",)


def test_several_nodes_on_one_chain_pick_the_upstream_most() -> None:
    wf = build("a", [("a", "b"), ("b", "c"), ("c", "d"), ("d", "done")])
    sel = select_pivot(wf, {"d": ["model"], "b": ["tools"], "c": ["shared prompt p"]}, ["a", "b", "c", "d"])
    assert sel.pivot == "b"
    assert [c.node for c in sel.candidates] == ["b", "c", "d"]


def test_never_executed_nodes_are_ignored() -> None:
    wf = build("a", [("a", "b"), ("b", "c"), ("c", "d"), ("d", "done")])
    sel = select_pivot(wf, {"b": ["x"], "d": ["y"]}, ["a", "b", "c"])
    assert sel.pivot == "b" and [c.node for c in sel.ignored] == ["d"]
    # an edit only on nodes after the checkpoint: nothing to rewind
    with pytest.raises(AutoRefusedError, match="never executed"):
        select_pivot(wf, {"d": ["y"]}, ["a", "b"])


def test_empty_diff_is_no_change() -> None:
    wf = build("a", [("a", "done")])
    with pytest.raises(AutoRefusedError, match="no change detected"):
        select_pivot(wf, {}, ["a"])


def test_loop_partners_pick_the_earliest_executed() -> None:
    wf = build("plan", [("plan", "implement"), ("implement", "verify"), ("verify", "implement"), ("verify", "done")])
    executed = ["plan", "implement", "verify", "implement", "verify"]
    assert select_pivot(wf, {"verify": ["r"], "implement": ["r"]}, executed).pivot == "implement"


def test_independent_fan_out_branches_are_refused_with_the_candidates_named() -> None:
    wf = fan_out_graph()
    executed = ["entry", "r", "b1", "c1", "b2", "j"]
    with pytest.raises(AutoRefusedError) as err:
        select_pivot(wf, {"b2": ["model"], "c1": ["prompt"]}, executed)
    assert err.value.candidates == ("c1", "b2")
    assert "c1, b2" in err.value.message and "independent" in err.value.message
    assert "--node r" in (err.value.hint or "")


def test_fan_out_body_plus_its_join_is_one_chain() -> None:
    wf = fan_out_graph()
    sel = select_pivot(wf, {"j": ["x"], "b1": ["y"]}, ["entry", "r", "b1", "c1", "b2", "j"])
    assert sel.pivot == "b1" and promote(wf, sel.pivot).pivot == "r"


def test_removed_node_in_the_diff_is_ignored() -> None:
    wf = build("a", [("a", "b"), ("b", "done")])
    sel = select_pivot(wf, {"gone": ["removed"], "b": ["edge to gone removed"]}, ["a", "gone", "b"])
    assert sel.pivot == "b" and [c.node for c in sel.ignored] == ["gone"]
