"""Where the branches of a fan-out converge: the one home of the rule, read by the validator
(``Workflow.fan_out_regions``) and by the engine (the node a fan-out's branches stop at).

docs/language.md §3 (Fan-out): "A branch runs until the convergence node: the first node, searching forward
from the branch targets, that declares `await` or has edges from two or more distinct
sources. [...] A router may itself be the convergence node."

The search is breadth-first from the targets, in edge declaration order. A fan-out met on
the way is its own region: the search does not look inside it (its branches converge on its
own convergence node, found the same way and memoised) and goes on from that node, which
is no candidate for the outer fan-out unless an outer path also reaches it directly. So a
chain or a nest of diamonds costs one visit per node, not one per path (issue 28: 25
nested diamonds ran more than 5,400 nodes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from iterion.dsl.graph import Graph
from iterion.ir import TERMINALS, NodeKind, RouterMode, Workflow


def is_fan_out_router(wf: Workflow, node_id: str) -> bool:
    node = wf.nodes.get(node_id)
    return node is not None and node.kind is NodeKind.ROUTER and node.mode is RouterMode.FAN_OUT_ALL


class Convergence:
    """Convergence nodes of a workflow's fan-outs, each computed once."""

    def __init__(self, wf: Workflow, graph: Graph | None = None) -> None:
        self.wf = wf
        self.g = graph or Graph(wf)
        self._sources: dict[str, int] = {}
        self._memo: dict[str, str | None] = {}
        self._active: set[str] = set()  # routers being computed (a fan-out reached again through a loop)

    def distinct_sources(self, node_id: str) -> int:
        n = self._sources.get(node_id)
        if n is None:
            n = self._sources[node_id] = len({e.src for e in self.g.into.get(node_id, ()) if e.src in self.wf.nodes})
        return n

    def is_candidate(self, node_id: str) -> bool:
        node = self.wf.nodes.get(node_id)
        return node is not None and (node.await_mode is not None or self.distinct_sources(node_id) >= 2)

    def precompute(self) -> None:
        """Every fan-out's convergence node, downstream ones first: a fan-out met inside another
        is then already known, so the search never recurses deeply (a chain of thousands of
        fan-outs stays within Python's recursion limit)."""
        for n in self.g.downstream_first():
            if is_fan_out_router(self.wf, n):
                self.of_router(n)

    def of_router(self, router: str) -> str | None:
        """The convergence node of a ``fan_out_all`` router's branches (None: they never meet)."""
        if router in self._memo:
            return self._memo[router]
        if router in self._active:
            return None
        self._active.add(router)
        try:
            join = self.of_targets(router, [e.dst for e in self.g.out.get(router, ())])
        finally:
            self._active.discard(router)
        self._memo[router] = join
        return join

    def of_targets(self, router: str, targets: Sequence[str]) -> str | None:
        """The convergence node of branches started by ``router`` towards ``targets`` (an llm
        router's several picks use this too)."""
        wf = self.wf
        # per queued node: reached by a path of this fan-out's own (True), or only as the
        # convergence node of an inner fan-out (False)
        direct: dict[str, bool] = {}
        popped: set[str] = set()
        queue: deque[str] = deque()

        def reach(n: str, is_direct: bool) -> str | None:
            if n in TERMINALS or n not in wf.nodes or n == router or wf.nodes[n].kind is NodeKind.FAIL:
                return None  # a named fail node is a terminal: branches may end there without meeting
            if n in direct:
                if is_direct and not direct[n]:
                    direct[n] = True
                    if n in popped and self.is_candidate(n):
                        return n  # an outer path meets an inner fan-out's convergence node
                return None
            direct[n] = is_direct
            queue.append(n)
            return None

        for t in targets:
            reach(t, True)
        while queue:
            n = queue.popleft()
            popped.add(n)
            if direct[n] and self.is_candidate(n):
                return n
            if is_fan_out_router(wf, n):
                inner = self.of_router(n)
                if inner is not None:
                    found = reach(inner, False)
                    if found is not None:
                        return found
                    continue
                # an inner fan-out whose branches never meet: its branches are searched as ours
            for s in self.g.succ(n):
                found = reach(s, True)
                if found is not None:
                    return found
        return None


def convergence_nodes(wf: Workflow, graph: Graph | None = None) -> dict[str, str | None]:
    """Every ``fan_out_all`` router's convergence node, in declaration order."""
    conv = Convergence(wf, graph)
    conv.precompute()
    return {r: conv.of_router(r) for r in wf.nodes if is_fan_out_router(wf, r)}
