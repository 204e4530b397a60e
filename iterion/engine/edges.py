"""Edge selection and loop bookkeeping: which edge(s) leave a node once it has its output.

Rules (docs/language.md section 3): the matching conditional edges are considered in declaration order,
the unconditional edge is the fallback. A loop edge (`as LOOP(N)`) already taken N times is
exhausted and never taken; when that leaves nothing, the failure names the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from iterion.engine.errors import NodeFailure
from iterion.engine.state import RunState
from iterion.failure_codes import FailureCode
from iterion.ir import ConditionKind, Edge, Workflow

Evaluate = Callable[[str, Mapping[str, Any]], Any]


def _default_evaluate(src: str, scope: Mapping[str, Any]) -> Any:
    from iterion.expr import evaluate

    return evaluate(src, scope)


def condition_holds(edge: Edge, output: Mapping[str, Any], scope: Mapping[str, Any],
                    evaluate: Evaluate = _default_evaluate) -> bool:
    cond = edge.condition
    if cond is None:
        return True
    if cond.kind is ConditionKind.FIELD:
        return output.get(cond.field or "") is True
    if cond.kind is ConditionKind.NOT_FIELD:
        return output.get(cond.field or "") is not True
    from iterion.expr import ExprError

    try:
        value = evaluate(cond.expr or "", scope)
    except ExprError as exc:
        raise NodeFailure(FailureCode.EXPRESSION_FAILED,
                          f"edge {edge.src} -> {edge.dst} {cond}: {getattr(exc, 'message', str(exc))}",
                          node=edge.src) from None
    if not isinstance(value, bool):
        raise NodeFailure(FailureCode.EXPRESSION_FAILED,
                          f"edge {edge.src} -> {edge.dst} {cond}: the condition gave {value!r}, not a bool",
                          node=edge.src)
    return value


def loop_exhausted(edge: Edge, state: RunState) -> bool:
    if edge.loop is None:
        return False
    cap = edge.loop_max if edge.loop_max is not None else 0
    return state.loop(edge.loop).iteration >= cap


def select_edge(wf: Workflow, node: str, output: Mapping[str, Any], scope: Mapping[str, Any],
                state: RunState, evaluate: Evaluate = _default_evaluate,
                edges: list[Edge] | None = None) -> Edge:
    """The one edge a non-fan-out node leaves by, or NO_OUTGOING_EDGE."""
    candidates = wf.out_edges(node) if edges is None else edges
    exhausted: list[Edge] = []
    fallback: Edge | None = None
    for edge in candidates:
        if edge.unconditional:
            if fallback is None:
                fallback = edge
            continue
        if condition_holds(edge, output, scope, evaluate):
            if loop_exhausted(edge, state):
                exhausted.append(edge)
                continue
            return edge
    if fallback is not None:
        if not loop_exhausted(fallback, state):
            return fallback
        exhausted.append(fallback)
    if not candidates:
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE, f"node {node} has no outgoing edge", node=node)
    if exhausted:
        loops = ", ".join(sorted({f"{e.loop}({e.loop_max})" for e in exhausted if e.loop}))
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE,
                          f"node {node}: no outgoing edge can be taken: loop {loops} is exhausted "
                          f"and no other edge matched", node=node, details={"loops": sorted({e.loop for e in exhausted if e.loop})})
    raise NodeFailure(FailureCode.NO_OUTGOING_EDGE, f"node {node}: no outgoing edge condition matched its output",
                      node=node)


def take_edge(edge: Edge, state: RunState, output: Mapping[str, Any]) -> None:
    """Loop bookkeeping for a taken edge: the closing edge counts one iteration of its loop."""
    if edge.loop is None:
        return
    with state.lock:
        loop = state.loop(edge.loop)
        loop.iteration += 1
        loop.previous_output = dict(output)


def note_loop_output(wf: Workflow, node: str, output: Mapping[str, Any], state: RunState) -> None:
    """Keep each loop's `current` snapshot: the latest output of a node closing it."""
    by_index = {e.index: e for e in wf.edges}
    for loop in wf.loops.values():
        if any(by_index[i].src == node for i in loop.edges if i in by_index):
            with state.lock:
                state.loop(loop.name).current_output = dict(output)


def nodes_in_cycles(wf: Workflow) -> frozenset[str]:
    """Nodes that can execute more than once (on a cycle): they keep an output history."""
    return frozenset(n for n in wf.nodes if n in wf.reachable_from(n))


def round_robin_edge(wf: Workflow, router: str, state: RunState) -> Edge:
    edges = wf.out_edges(router)
    if not edges:
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE, f"router {router} has no outgoing edge", node=router)
    with state.lock:
        pos = state.round_robin.get(router, 0)
        state.round_robin[router] = pos + 1
    return edges[pos % len(edges)]
