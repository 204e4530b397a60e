"""THE invalidation rule, in one place: which nodes' outputs a rewind to ``pivot`` drops.

The pivot's output, plus every node forward-reachable from the pivot that cannot reach it back.
Subtracting the pivot's ancestors is what makes loops behave: in
``implement -> verify -> implement as fix(3)`` verify is downstream AND upstream of implement,
and its output is what implement re-reads through ``{{loop.fix.previous_output}}`` on re-entry,
so it survives. Over-dropping is as harmful as under-dropping: a dropped output that is read
before its node re-executes resolves to nil instead of a re-run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from iterion.ir import Workflow
from iterion.rewind.errors import UnknownNodeError


def require_node(wf: Workflow, node: str) -> None:
    if node not in wf.nodes:
        known = ", ".join(sorted(wf.nodes))
        raise UnknownNodeError(
            f"workflow {wf.name} has no node {node!r}",
            hint=f"nodes of {wf.name}: {known}",
        )


def invalidated_nodes(wf: Workflow, pivot: str) -> frozenset[str]:
    """The nodes whose outputs a rewind to ``pivot`` drops (the pivot included)."""
    require_node(wf, pivot)
    downstream = wf.reachable_from(pivot)
    return frozenset({pivot} | (downstream - wf.ancestors_of(pivot)))


def graph_order(wf: Workflow) -> dict[str, int]:
    """Breadth-first position of every node from the entry, edges in declaration order."""
    order: dict[str, int] = {}
    queue = [wf.entry]
    while queue:
        n = queue.pop(0)
        if n in order or n not in wf.nodes:
            continue
        order[n] = len(order)
        queue.extend(wf.successors(n))
    return order


def in_execution_order(nodes: Iterable[str], executed: Sequence[str],
                       wf: Workflow | None = None) -> list[str]:
    """``nodes`` ordered by first execution; never-executed ones after, in graph order (stable reports)."""
    first: dict[str, int] = {}
    for i, n in enumerate(executed):
        first.setdefault(n, i)
    big = len(executed)
    position = graph_order(wf) if wf is not None else {}
    return sorted(set(nodes), key=lambda n: (first.get(n, big), position.get(n, len(position)), n))
