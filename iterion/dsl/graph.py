"""Adjacency and reachability of a compiled workflow, built once.

The IR's own helpers scan the edge list per call, which is quadratic on the 2,000-line
workflows the validator must handle quickly; here the strongly connected components are
computed once and reachability queries search only the part of the graph that can matter,
in memory linear in the graph (see ``Graph``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

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
    """Adjacency, plus reachability answered in memory linear in the graph.

    No transitive closure is stored (one bitset per node is quadratic: a 250,000-node chain
    needs gigabytes). Instead the strongly connected components are numbered once, in reverse
    topological order, and a query searches forward only through components numbered between
    the two ends (nothing else can lie on a path), stopping at the first hit. A consumer that is
    asked about many times (a prompt reading many outputs) gets its ancestor set computed once
    and kept until the next such consumer.
    """

    _ANCESTOR_CACHE_AFTER = 8  # queries for one destination before its ancestor set is worth computing

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
        self._comp_of: dict[str, int] | None = None
        self._comps: list[list[str]] = []
        self._cyclic: list[bool] = []
        self._radj: dict[str, list[str]] | None = None
        self._asked: dict[str, int] = {}
        self._ancestors_of: str | None = None
        self._ancestors: set[str] = set()
        self._loop_nodes: frozenset[str] | None = None

    def succ(self, node_id: str) -> list[str]:
        return self.adj.get(node_id, [])

    def _components(self) -> dict[str, int]:
        if self._comp_of is None:
            comp_of: dict[str, int] = {}
            self._comps = sccs(list(self.wf.nodes), self.adj)
            for ci, comp in enumerate(self._comps):
                for n in comp:
                    comp_of[n] = ci
            self._cyclic = [len(comp) > 1 or comp[0] in self.adj[comp[0]] for comp in self._comps]
            self._comp_of = comp_of
        return self._comp_of

    def _search(self, starts: list[str], adj: dict[str, list[str]], keep: Callable[[str], bool],
                goal: str | None = None) -> set[str] | bool:
        """Nodes reached from ``starts`` through nodes ``keep`` accepts (or, with ``goal``, whether it is)."""
        seen: set[str] = set()
        stack = [s for s in starts if keep(s)]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            if n == goal:
                return True
            seen.add(n)
            stack.extend(s for s in adj.get(n, ()) if s not in seen and keep(s))
        return False if goal is not None else seen

    def reaches(self, src: str, dst: str) -> bool:
        """Is there a path of one or more edges from ``src`` to ``dst``?"""
        comp_of = self._components()
        cs, cd = comp_of.get(src), comp_of.get(dst)
        if cs is None or cd is None or cd > cs:
            return False  # components reached are numbered lower
        if cs == cd:
            return self._cyclic[cs]
        if self._ancestors_of == dst:
            return src in self._ancestors
        asked = self._asked[dst] = self._asked.get(dst, 0) + 1
        if asked > self._ANCESTOR_CACHE_AFTER:
            if self._radj is None:
                self._radj = defaultdict(list)
                for n, succs in self.adj.items():
                    for s in succs:
                        self._radj[s].append(n)
            found = self._search(self._radj.get(dst, []), self._radj, lambda n: comp_of[n] >= cd)
            assert isinstance(found, set)
            self._ancestors_of, self._ancestors = dst, found
            return src in found
        return bool(self._search(self.adj[src], self.adj, lambda n: cd <= comp_of[n] <= cs, goal=dst))

    def reach(self, start: str) -> frozenset[str]:
        """Nodes forward-reachable from ``start`` (``start`` itself only via a cycle)."""
        found = self._search(self.adj.get(start, []), self.adj, lambda n: True)
        assert isinstance(found, set)
        return frozenset(found)

    def downstream_first(self) -> list[str]:
        """Every node, those a node reaches before it (reverse topological order of the
        components; inside a cycle, any order)."""
        self._components()
        return [n for comp in self._comps for n in comp]

    def cyclic_nodes(self) -> frozenset[str]:
        """Nodes on some cycle (they can execute more than once), in time linear in the graph."""
        comp_of = self._components()
        return frozenset(n for n, ci in comp_of.items() if self._cyclic[ci])

    def loop_nodes(self) -> frozenset[str]:
        """Nodes on some cycle closed by an ``as LOOP(N)`` edge (they have a ``.history``).

        Such a node lies on a path dst -> ... -> src of a loop edge src -> dst, which with the
        edge itself is a cycle: exactly the strongly connected component holding both ends.
        """
        if self._loop_nodes is None:
            comp_of = self._components()
            found: set[str] = set()
            for e in self.wf.edges:
                if e.loop is None or e.dst not in self.wf.nodes or e.src not in self.wf.nodes:
                    continue
                ci = comp_of[e.dst]
                if comp_of[e.src] == ci and self._cyclic[ci]:
                    found.update(self._comps[ci])
            self._loop_nodes = frozenset(found)
        return self._loop_nodes
