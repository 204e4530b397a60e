"""Fan-out promotion: a pivot inside a fan-out body moves to the router that orchestrates it.

The checkpoint holds one entry per node id (the last of N parallel executions wins), so anchoring
on a body node would replay it once, linearly, without its branch context. The whole fan-out
replays instead; nested fan-outs promote to the OUTERMOST router, because an inner one re-run
alone would itself lack the outer iteration's context.
"""

from __future__ import annotations

from dataclasses import dataclass

from iterion.ir import Workflow
from iterion.rewind.invalidation import require_node


@dataclass(frozen=True)
class Promotion:
    pivot: str  # the node the rewind anchors on
    promoted_from: str | None  # the node asked for, when it was promoted; None otherwise

    @property
    def promoted(self) -> bool:
        return self.promoted_from is not None


def promote(wf: Workflow, node: str) -> Promotion:
    require_node(wf, node)
    pivot = node
    seen = {pivot}
    # Walk outwards region by region: works whether or not the compiler lists nested bodies
    # transitively in the outer region's body.
    while (region := wf.region_of(pivot)) is not None and region.router not in seen:
        pivot = region.router
        seen.add(pivot)
    return Promotion(pivot=pivot, promoted_from=node if pivot != node else None)
