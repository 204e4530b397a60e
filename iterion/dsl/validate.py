"""Validator: graph rules over the compiled workflow, and fan-out regions.

Edges (C010-C014, C020-C022), reachability (C016), undeclared cycles (C019), sessions of
nodes declaring await (C009). No await is required where branches converge (the C108/C109
rule is withdrawn, docs/language.md 3.2); where they converge is ``iterion.dsl.convergence``. References inside templates and expressions are checked by
``iterion.dsl.references``. Fills ``Workflow.fan_out_regions``.
"""

from __future__ import annotations

from iterion.dsl.compiler import Sources
from iterion.dsl.convergence import Convergence, is_fan_out_router
from iterion.dsl.diagnostics import Sink
from iterion.dsl.graph import Graph
from iterion.dsl.references import check_references
from iterion.ir import (
    TERMINALS,
    ConditionKind,
    Edge,
    FanOutRegion,
    FieldType,
    NodeKind,
    RouterMode,
    Workflow,
)


def validate(wf: Workflow, sources: Sources, sink: Sink) -> None:
    g = Graph(wf)
    for node_id in wf.nodes:
        _check_out_edges(wf, g, node_id, sink)
    if wf.entry:
        _check_reachable(wf, g, sink)
    _check_cycles(wf, g, sources.terminal_edges, sink)
    _check_with_keys(wf, g, sink)
    _fan_out_regions(wf, g, sink)
    _check_await_sessions(wf, sink)
    check_references(wf, g, sources, sink)


def _check_out_edges(wf: Workflow, g: Graph, node_id: str, sink: Sink) -> None:
    node = wf.nodes[node_id]
    edges = g.out[node_id]
    router = node.kind is NodeKind.ROUTER
    plain_or_loop = [e for e in edges if e.condition is None]
    if router and node.mode is RouterMode.ROUND_ROBIN and len(plain_or_loop) < 2:
        sink.add("C020", node.span, f"round_robin router '{node_id}' has {len(plain_or_loop)} non-conditional edge(s); it needs at least 2",
                 "a round_robin router cycles through its targets")
    if router and node.mode is RouterMode.LLM:
        if len(edges) < 2:
            sink.add("C021", node.span, f"llm router '{node_id}' has {len(edges)} outgoing edge(s); it needs at least 2",
                     "the model picks among the targets")
        for e in edges:
            if e.condition is not None and e.condition.kind is not ConditionKind.EXPR:  # as observed
                sink.add("C022", e.span, f"edge {e.src} -> {e.dst} has a 'when', but '{node_id}' is an llm router",
                         "the model picks the target; remove the condition")
        return
    if router and node.mode in (RouterMode.FAN_OUT_ALL, RouterMode.ROUND_ROBIN):
        return
    unconditional = [e for e in edges if e.condition is None]  # plain and loop-bearing
    plain = [e for e in unconditional if e.loop is None]  # a loop-bearing edge is not counted (C010)
    for extra in plain[1:]:
        sink.add("C010", extra.span, f"'{node_id}' has more than one plain edge (first: -> {plain[0].dst})",
                 "add 'when' conditions, or use a router (mode: fan_out_all) to run targets in parallel")
    seen: dict[tuple[str, str | None, str | None], Edge] = {}
    for e in edges:
        if e.condition is None:
            continue
        key = (e.condition.kind.value, e.condition.field, e.condition.expr)
        if key in seen:
            sink.add("C011", e.span, f"'{node_id}' has the condition '{e.condition}' twice (also -> {seen[key].dst})",
                     "which edge to take would be ambiguous; merge them or change one condition")
        else:
            seen[key] = e
        if e.condition.kind is not ConditionKind.EXPR:
            _check_when_field(wf, node_id, e, sink)
    conditional = [e for e in edges if e.condition is not None]
    if conditional and not unconditional:
        positive = {e.condition.field for e in conditional if e.condition and e.condition.kind is ConditionKind.FIELD}
        negative = {e.condition.field for e in conditional if e.condition and e.condition.kind is ConditionKind.NOT_FIELD}
        if not positive & negative:
            sink.add("C012", conditional[-1].span,
                     f"the conditions out of '{node_id}' are not exhaustive and there is no unconditional fallback",
                     f"add '{node_id} -> done' (or another target) as a fallback, or cover both 'when x' and 'when not x'")


def _check_when_field(wf: Workflow, node_id: str, e: Edge, sink: Sink) -> None:
    node = wf.nodes[node_id]
    assert e.condition is not None and e.condition.field is not None
    name = e.condition.field
    schema = node.output_schema
    if node.kind is NodeKind.ROUTER:
        schema = node.input_schema
        if schema is None:
            return  # a condition router routes on its input; without a schema nothing is known
    if schema is None:
        return  # "If SRC has an output schema, FIELD must exist (C014) and be bool (C013)" (docs/language.md §3)
    f = schema.field(name)
    if f is None:
        sink.add("C014", e.span, f"'when {name}': '{name}' is not a field of schema '{schema.name}' (output of '{node_id}')",
                 "fields: " + ", ".join(x.name for x in schema.fields) if schema.fields else None)
    elif f.type is not FieldType.BOOL:
        sink.add("C013", e.span, f"'when {name}': field '{name}' of schema '{schema.name}' is {f.type.value}, not bool",
                 f'compare it in a quoted expression, e.g. when "outputs.{node_id}.{name} == ..."')


def _check_reachable(wf: Workflow, g: Graph, sink: Sink) -> None:
    seen = g.reach(wf.entry) | {wf.entry}
    for node_id, node in wf.nodes.items():
        if node_id not in seen:
            sink.add("C016", node.span, f"'{node_id}' is not reachable from the entry '{wf.entry}'",
                     "add an edge into it, or remove it")


def _check_cycles(wf: Workflow, g: Graph, terminal_edges: list[Edge], sink: Sink) -> None:
    """C019 (docs/language.md 3.2): a cycle is reported at its back edge (depth-first, nodes and edges in
    declaration order) only when neither endpoint of that edge is an endpoint of some loop
    edge, so an extra unbounded path between nodes that touch a loop passes. The terminals are
    vertices too: an edge out of `done` (C112) that leads back closes a cycle, as in the original."""
    loop_ends = {n for e in (*wf.edges, *terminal_edges) if e.loop is not None for n in (e.src, e.dst)}
    out_of: dict[str, list[Edge]] = {}
    for e in terminal_edges:
        out_of.setdefault(e.src, list(g.out[e.src])).append(e)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in wf.nodes:
        if root in state:
            continue
        state[root] = 1
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            n, i = work[-1]
            out = out_of.get(n) or g.out[n]
            if i >= len(out):
                state[n] = 2
                work.pop()
                continue
            work[-1] = (n, i + 1)
            e = out[i]
            d = e.dst
            if d not in wf.nodes and d not in TERMINALS:
                continue  # an undeclared target is C001; `done` and `fail` are vertices (below)
            st = state.get(d)
            if st is None:
                state[d] = 1
                work.append((d, 0))
            elif st == 1 and e.src not in loop_ends and d not in loop_ends:
                sink.add("C019", e.span, f"cycle without a declared loop: {e.src} -> {d} leads back to '{d}'",
                         f"remove the edge out of '{e.src}': a run ends there" if e.index < 0 else
                         f"declare the back edge as a bounded loop: {e.src} -> {d} ... as NAME(N)")


def _check_with_keys(wf: Workflow, g: Graph, sink: Sink) -> None:
    """C028 (docs/language.md §3.6): the same key into one target from two edges, except
    conditional edges, loop edges, edges out of loop entry nodes and edges into a convergence
    target (two or more distinct sources, or ``await``). A key written twice in one map is
    not this: the last wins there (C105, the compiler's)."""
    loop_entries = {e.dst for e in wf.edges if e.loop is not None}
    for dst, into in g.into.items():
        node = wf.nodes.get(dst)
        if len({e.src for e in into}) > 1 or (node is not None and node.await_mode is not None):
            continue
        first: dict[str, Edge] = {}
        for e in into:
            if e.condition is not None or e.loop is not None or e.src in loop_entries:
                continue
            for key, _ in e.with_map:
                if key in first:
                    sink.add("C028", e.span, f"key '{key}' goes into '{dst}' on two edges (also at line "
                             f"{first[key].span.line})", "pass it on one edge only")
                else:
                    first[key] = e


def _fan_out_regions(wf: Workflow, g: Graph, sink: Sink) -> None:
    conv = Convergence(wf, g)
    conv.precompute()
    routers = [n for n in wf.nodes if is_fan_out_router(wf, n)]
    memo: dict[str, FanOutRegion] = {}
    for r in (n for n in g.downstream_first() if is_fan_out_router(wf, n)):  # inner regions first
        _region(wf, g, conv, r, memo, ())
    wf.fan_out_regions = {r: memo[r] for r in routers if r in memo}


def _region(wf: Workflow, g: Graph, conv: Convergence, router: str, memo: dict[str, FanOutRegion],
            active: tuple[str, ...]) -> FanOutRegion:
    """The branches of ``router`` up to its convergence node (``iterion.dsl.convergence``), nested
    fan-outs inlined."""
    if router in memo:
        return memo[router]
    join = conv.of_router(router)
    branches: list[tuple[str, ...]] = []
    for e in g.out[router]:
        body: list[str] = []
        seen: set[str] = set()
        stack = [e.dst]
        while stack:
            n = stack.pop()
            if n in TERMINALS or n not in wf.nodes or n in seen or n == router or n == join:
                continue
            seen.add(n)
            body.append(n)  # a named fail node is a terminal: several branches may end there
            if is_fan_out_router(wf, n) and n not in active:
                inner = _region(wf, g, conv, n, memo, (*active, router))
                for b in (x for branch in inner.branches for x in branch):  # declaration order
                    if b not in seen and b != join:
                        seen.add(b)
                        body.append(b)
                if inner.join is not None and inner.join not in seen and inner.join != join:
                    seen.add(inner.join)
                    body.append(inner.join)
                    stack.extend(reversed(g.succ(inner.join)))
                continue
            stack.extend(reversed(g.succ(n)))
        branches.append(tuple(body))
    region = FanOutRegion(router, tuple(branches), join)
    memo[router] = region
    return region


def _check_await_sessions(wf: Workflow, sink: Sink) -> None:
    for node_id, node in wf.nodes.items():
        if node.await_mode is not None and node.session in ("inherit", "inherit_if_available", "fork"):
            sink.add("C009", node.span,
                     f"'{node_id}' declares await and cannot use session: {node.session}",
                     "several branches arrive here, so there is no single session to continue; use fresh or artifacts_only")
