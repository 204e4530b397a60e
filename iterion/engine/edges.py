"""Edge selection and loop bookkeeping: which edge(s) leave a node once it has its output.

Rules (docs/language.md section 3): the matching conditional edges are considered in declaration order,
the unconditional edge is the fallback. A loop edge (`as LOOP(N)`) already taken N times is
exhausted and never taken; when that leaves nothing, the failure names the loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from iterion.engine.errors import NodeFailure
from iterion.engine.state import RunState
from iterion.failure_codes import FailureCode
from iterion.ir import ConditionKind, Edge, Workflow

Evaluate = Callable[[str, Mapping[str, Any]], Any]
# warn(message, payload): a run-time warning the caller records as a `warning` event
Warn = Callable[[str, dict[str, Any]], None]


def _default_evaluate(src: str, scope: Mapping[str, Any]) -> Any:
    from iterion.expr import evaluate

    return evaluate(src, scope)


def warner(emit: Callable[[str, str | None, int | None, dict[str, Any]], None], node: str,
           iteration: int | None) -> Warn:
    """A ``Warn`` that records each warning as a `warning` event of ``node``."""
    from iterion.store import events as ev

    def warn(message: str, payload: dict[str, Any]) -> None:
        emit(ev.WARNING, node, iteration, {"message": message, **payload})

    return warn


def condition_holds(edge: Edge, output: Mapping[str, Any], scope: Mapping[str, Any],
                    evaluate: Evaluate = _default_evaluate, warn: Warn | None = None) -> bool:
    """Whether ``edge``'s `when` matches ``output`` (the source's output).

    `when FIELD` / `when not FIELD`: the field must be present and a real boolean, else the
    edge does not match (a present non-boolean also warns). `when "EXPR"`: evaluated with
    ``input`` = the source's output (bare names are its fields), the result read by
    truthiness; an expression that fails to evaluate skips the edge with a warning
    (docs/language.md §3.3), it never fails the run.
    """
    cond = edge.condition
    if cond is None:
        return True
    if cond.kind in (ConditionKind.FIELD, ConditionKind.NOT_FIELD):
        value = output.get(cond.field or "")
        if not isinstance(value, bool):
            if value is not None and warn is not None:
                warn(f"edge {edge.src} -> {edge.dst}: field {cond.field!r} is {type(value).__name__}, "
                     "not a bool; the edge is skipped",
                     {"code": "when_not_bool", "edge": edge.index, "to": edge.dst, "field": cond.field})
            return False
        return value if cond.kind is ConditionKind.FIELD else not value
    from iterion.expr import ExprError, truthy

    try:
        value = evaluate(cond.expr or "", {**scope, "input": dict(output)})
    except ExprError as exc:
        message = getattr(exc, "message", str(exc))
        if warn is not None:
            warn(f"edge {edge.src} -> {edge.dst} when {cond.expr!r} failed: {message}; the edge is skipped",
                 {"code": "when_failed", "edge": edge.index, "to": edge.dst, "expr": cond.expr,
                  "error": message})
        return False
    return truthy(value)


def loop_bound(edge: Edge, scope: Mapping[str, Any] | None) -> int:
    """The effective bound of ``edge``'s loop: its literal N, or its template bound resolved now
    from the last reference that resolves to an int, a float (truncated) or a numeric string;
    none: 0, so the edge is never taken (docs/language.md §3.5)."""
    if edge.loop_bound is None:
        return edge.loop_max if edge.loop_max is not None else 0
    if scope is None:
        return 0
    from iterion.expr import ExprEvalError, resolve_reference
    from iterion.templates import TemplateSyntaxError, template_references

    try:
        refs = template_references(edge.loop_bound)
    except TemplateSyntaxError:
        return 0
    for ref in reversed(refs):
        try:
            value = resolve_reference(ref, scope)
        except ExprEvalError:
            continue
        number = _as_bound(value)
        if number is not None:
            return number
    return 0


def _as_bound(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and abs(value) < 2 ** 63 else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return _as_bound(float(text))
            except ValueError:
                return None
    return None


def loop_exhausted(edge: Edge, state: RunState, scope: Mapping[str, Any] | None = None) -> bool:
    if edge.loop is None:
        return False
    return state.loop(edge.loop).iteration >= loop_bound(edge, scope)


def select_edge(wf: Workflow, node: str, output: Mapping[str, Any], scope: Mapping[str, Any],
                state: RunState, evaluate: Evaluate = _default_evaluate,
                edges: list[Edge] | None = None, warn: Warn | None = None) -> Edge:
    """The one edge a non-fan-out node leaves by, or NO_OUTGOING_EDGE."""
    candidates = wf.out_edges(node) if edges is None else edges
    exhausted: list[Edge] = []
    fallback: Edge | None = None
    for edge in candidates:
        if edge.unconditional:
            # "else the first non-conditional edge not skipped" (docs/language.md §3): an exhausted loop edge
            # is skipped, so `polish -> polish as passes(3)` then `polish -> done` falls through
            if fallback is None:
                if loop_exhausted(edge, state, scope):
                    exhausted.append(edge)
                else:
                    fallback = edge
            continue
        if condition_holds(edge, output, scope, evaluate, warn):
            if loop_exhausted(edge, state, scope):
                exhausted.append(edge)
                continue
            return edge
    if fallback is not None:
        return fallback
    if not candidates:
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE, f"node {node} has no outgoing edge", node=node)
    if exhausted:
        loops = ", ".join(sorted({f"{e.loop}({loop_bound(e, scope)})" for e in exhausted if e.loop}))
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE,
                          f"node {node}: no outgoing edge can be taken: loop {loops} is exhausted "
                          f"and no other edge matched", node=node, details={"loops": sorted({e.loop for e in exhausted if e.loop})})
    raise NodeFailure(FailureCode.NO_OUTGOING_EDGE, f"node {node}: no outgoing edge condition matched its output",
                      node=node)


def loop_body(wf: Workflow, loop: str) -> frozenset[str]:
    """The nodes on the cycles a loop's edges close: from each loop edge's target back to its
    source, without crossing another loop's edges (an outer loop's back edge is not this body)."""
    usable = [e for e in wf.edges if e.loop in (None, loop)]

    def closure(start: str, forward: bool) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            n = todo.pop()
            for e in usable:
                a, b = (e.src, e.dst) if forward else (e.dst, e.src)
                if a == n and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    body: set[str] = set()
    for e in wf.edges:
        if e.loop == loop:
            body |= closure(e.dst, True) & closure(e.src, False)
    return frozenset(body)


def reset_entered_loops(wf: Workflow, edge: Edge, state: RunState) -> None:
    """"The counter resets to 0 when a non-loop edge enters one of the loop's entry nodes (targets of
    its loop edges) from outside the loop body, so a nested loop gets a fresh budget each outer
    round" (docs/language.md 3)."""
    if edge.loop is not None:
        return
    for e in wf.edges:
        if e.loop is None or e.dst != edge.dst or e.loop not in state.loops:
            continue
        if edge.src not in loop_body(wf, e.loop):
            with state.lock:
                state.loop(e.loop).iteration = 0


def take_edge(edge: Edge, state: RunState, output: Mapping[str, Any], wf: Workflow | None = None) -> None:
    """Loop bookkeeping for a taken edge: the closing edge counts one iteration of its loop; a plain
    edge entering a loop from outside resets that loop's counter (``wf`` given)."""
    if wf is not None:
        reset_entered_loops(wf, edge, state)
    if edge.loop is None:
        return
    with state.lock:
        loop = state.loop(edge.loop)
        loop.iteration += 1
        # "the loop-edge source's output at the PREVIOUS crossing (empty before the second
        # crossing)" (docs/language.md §3, Loops): the lag of one crossing is the rule
        loop.previous_output = loop.crossed_output
        loop.crossed_output = dict(output)


def note_loop_output(wf: Workflow, node: str, output: Mapping[str, Any], state: RunState) -> None:
    """Keep each loop's `current` snapshot: the latest output of a node closing it."""
    by_index = {e.index: e for e in wf.edges}
    for loop in wf.loops.values():
        if any(by_index[i].src == node for i in loop.edges if i in by_index):
            with state.lock:
                state.loop(loop.name).current_output = dict(output)


def nodes_in_cycles(wf: Workflow) -> frozenset[str]:
    """Nodes that can execute more than once (on a cycle): they keep an output history.

    The strongly connected components, once: linear in nodes + edges (a reachability search
    per node was cubic, and a 5,000-node chain never ran its first node: issue 28)."""
    from iterion.dsl.graph import Graph

    return Graph(wf).cyclic_nodes()


def round_robin_edge(wf: Workflow, router: str, state: RunState) -> Edge:
    edges = wf.out_edges(router)
    if not edges:
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE, f"router {router} has no outgoing edge", node=router)
    with state.lock:
        pos = state.round_robin.get(router, 0)
        state.round_robin[router] = pos + 1
    return edges[pos % len(edges)]
