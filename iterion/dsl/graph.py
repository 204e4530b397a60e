"""Adjacency and reachability of a compiled workflow, built once.

The IR's own helpers scan the edge list per call, which is quadratic on the 2,000-line
workflows the validator must handle quickly; here reachability is one pass over the strongly
connected components with Python ints as bitsets.
"""

from __future__ import annotations

from collections import defaultdict

from iterion.ir import TERMINALS, Edge, Workflow


def sccs(nodes: list[str], adj: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative (deep graphs must not hit recursion limits).

    Components come out in reverse topological order: every component a component reaches is
    emitted before it.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = adj.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


class Graph:
    def __init__(self, wf: Workflow) -> None:
        self.wf = wf
        self.out: dict[str, list[Edge]] = defaultdict(list)
        self.into: dict[str, list[Edge]] = defaultdict(list)
        self.adj: dict[str, list[str]] = {n: [] for n in wf.nodes}
        for e in wf.edges:
            self.out[e.src].append(e)
            self.into[e.dst].append(e)
            if e.dst not in TERMINALS and e.dst in wf.nodes and e.src in self.adj:
                self.adj[e.src].append(e.dst)
        self._bit = {n: 1 << i for i, n in enumerate(wf.nodes)}
        self._reach_bits: dict[str, int] | None = None
        self._loop_nodes: frozenset[str] | None = None

    def succ(self, node_id: str) -> list[str]:
        return self.adj.get(node_id, [])

    def _closure(self) -> dict[str, int]:
        if self._reach_bits is None:
            comp_of: dict[str, int] = {}
            comp_bits: list[int] = []
            reach: list[int] = []
            for ci, comp in enumerate(sccs(list(self.wf.nodes), self.adj)):
                bits = 0
                for n in comp:
                    comp_of[n] = ci
                    bits |= self._bit[n]
                comp_bits.append(bits)
                r = 0
                cyclic = len(comp) > 1
                for n in comp:
                    for s in self.adj[n]:
                        cs = comp_of[s]  # emitted earlier (reverse topological order), or this one
                        if cs != ci:
                            r |= comp_bits[cs] | reach[cs]
                        elif s == n:
                            cyclic = True
                reach.append(r | (bits if cyclic else 0))
            self._reach_bits = {n: reach[c] for n, c in comp_of.items()}
        return self._reach_bits

    def reaches(self, src: str, dst: str) -> bool:
        """Is there a path of one or more edges from ``src`` to ``dst``?"""
        bits = self._closure().get(src, 0)
        return bool(bits & self._bit.get(dst, 0))

    def reach(self, start: str) -> frozenset[str]:
        """Nodes forward-reachable from ``start`` (``start`` itself only via a cycle)."""
        bits = self._closure().get(start, 0)
        return frozenset(n for n, b in self._bit.items() if bits & b)

    def loop_nodes(self) -> frozenset[str]:
        """Nodes on some cycle closed by an ``as LOOP(N)`` edge (they have a ``.history``)."""
        if self._loop_nodes is None:
            found: set[str] = set()
            for e in self.wf.edges:
                if e.loop is None or e.dst not in self.wf.nodes or e.src not in self.wf.nodes:
                    continue
                for n in self.wf.nodes:
                    after_dst = n == e.dst or self.reaches(e.dst, n)
                    if after_dst and (n == e.src or self.reaches(n, e.src)):
                        found.add(n)
            self._loop_nodes = frozenset(found)
        return self._loop_nodes
