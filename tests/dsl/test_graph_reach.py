"""``iterion.dsl.graph.Graph`` answers reachability in linear memory: its answers equal a naive
search on random graphs (loops, self-loops, terminals, edges to unknown nodes), and a long
chain stays linear (no per-node closure)."""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from iterion.dsl.graph import Graph
from iterion.ir import DONE, Edge, Node, NodeKind, Span, Workflow

SP = Span("g.bot", 1, 1)


def workflow(n: int, pairs: list[tuple[int, int, bool]]) -> Workflow:
    nodes = {f"n{i}": Node(f"n{i}", NodeKind.TOOL, SP) for i in range(n)}
    names = [*nodes, DONE, "ghost"]
    edges = [Edge(i, f"n{s % n}", names[d % len(names)], SP, loop=("l" if loop else None))
             for i, (s, d, loop) in enumerate(pairs)]
    return Workflow("w", "n0", nodes, edges)


def naive_reach(wf: Workflow, start: str) -> set[str]:
    seen: set[str] = set()
    todo = [e.dst for e in wf.edges if e.src == start and e.dst in wf.nodes]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(e.dst for e in wf.edges if e.src == n and e.dst in wf.nodes)
    return seen


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 9), st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20), st.booleans()), max_size=25))
def test_reachability_matches_a_naive_search(n: int, pairs: list[tuple[int, int, bool]]) -> None:
    wf = workflow(n, pairs)
    g = Graph(wf)
    reach = {a: naive_reach(wf, a) for a in wf.nodes}
    for a in wf.nodes:
        assert g.reach(a) == reach[a]
        for b in wf.nodes:
            assert g.reaches(a, b) == (b in reach[a]), (a, b)
    # asked often enough, one destination's ancestors are cached: the answers stay the same
    for _ in range(3):
        for a in wf.nodes:
            assert g.reaches(a, "n0") == ("n0" in reach[a])
    loops = {x for e in wf.edges if e.loop and e.dst in wf.nodes
             for x in wf.nodes
             if (x == e.dst or x in reach[e.dst]) and (x == e.src or e.src in reach[x])}
    assert g.loop_nodes() == loops


def test_a_long_chain_needs_memory_linear_in_its_length() -> None:
    n = 50_000
    wf = workflow(n, [(i, i + 1, False) for i in range(n - 1)])
    g = Graph(wf)
    tracemalloc.start()
    try:
        assert g.reaches("n0", f"n{n - 1}") and not g.reaches(f"n{n - 1}", "n0")
        assert g.reaches("n1000", "n1001") and len(g.reach(f"n{n - 10}")) == 9
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a closure of one bitset per node would need n^2/16 bytes (~156 MB here); linear is ~100 bytes a node
    assert peak < 400 * n, peak
