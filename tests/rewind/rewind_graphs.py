"""Hand-built ``iterion.ir.Workflow`` graphs for the pure rewind functions' tests."""

from __future__ import annotations

from iterion.ir import DONE, Edge, FanOutRegion, Node, NodeKind, RouterMode, Span, Workflow

SPAN = Span("test.bot", 1, 1)


def build(entry: str, edges: list[tuple[str, str]], *, fan_outs: dict[str, tuple[tuple[str, ...], ...]] | None = None,
          joins: dict[str, str | None] | None = None) -> Workflow:
    """A workflow whose nodes are the edge endpoints (tools, or fan_out_all routers for ``fan_outs`` keys)."""
    fan_outs = fan_outs or {}
    names: list[str] = []
    for src, dst in edges:
        for n in (src, dst):
            if n != DONE and n not in names:
                names.append(n)
    nodes = {}
    for n in names:
        if n in fan_outs:
            nodes[n] = Node(id=n, kind=NodeKind.ROUTER, span=SPAN, mode=RouterMode.FAN_OUT_ALL)
        else:
            nodes[n] = Node(id=n, kind=NodeKind.TOOL, span=SPAN, command="true")
    es = [Edge(index=i, src=s, dst=d, span=SPAN) for i, (s, d) in enumerate(edges)]
    regions = {r: FanOutRegion(router=r, branches=b, join=(joins or {}).get(r)) for r, b in fan_outs.items()}
    return Workflow(name="t", entry=entry, nodes=nodes, edges=es, fan_out_regions=regions)
