"""``--auto``: from "what the edit impacts" to the one node to rewind to.

The declaration diff (``iterion.dsl.diff``) maps an edit to impacted nodes with reasons; this
module applies the selection of docs/user-guide.md "Rewind" on top of it:

* nodes the run never executed are ignored;
* several nodes on one chain -> the upstream-most (every other candidate is reachable from it);
  when several qualify (a loop makes them mutually reachable), the earliest executed;
* candidates on independent branches (no candidate reaches all the others, e.g. two branches
  of one fan-out) -> refused with the candidates named: no single pivot covers them.

The chosen node then goes through fan-out promotion like a ``--node`` pivot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from iterion.ir import Workflow
from iterion.rewind.errors import AutoRefusedError
from iterion.rewind.invalidation import in_execution_order
from iterion.rewind.promotion import promote


@dataclass(frozen=True)
class Candidate:
    node: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class AutoSelection:
    pivot: str  # before promotion
    candidates: tuple[Candidate, ...]  # impacted AND executed, earliest executed first
    ignored: tuple[Candidate, ...]  # impacted but never executed (or no longer in the workflow)


def _covers(wf: Workflow, node: str, others: Sequence[str]) -> bool:
    reach = wf.reachable_from(node)
    return all(o == node or o in reach for o in others)


def select_pivot(wf: Workflow, impacted: Mapping[str, Sequence[str]],
                 executed: Sequence[str]) -> AutoSelection:
    """Pick the pivot among ``impacted`` nodes (node -> reasons), given the executed-node order."""
    ran = set(executed)
    ordered = in_execution_order(impacted, executed, wf)
    candidates = tuple(Candidate(n, tuple(impacted[n])) for n in ordered if n in ran and n in wf.nodes)
    ignored = tuple(Candidate(n, tuple(impacted[n])) for n in ordered if n not in ran or n not in wf.nodes)
    if not impacted:
        raise AutoRefusedError(
            "no change detected between the source the run executed and the source on disk "
            "(comments and line shifts are not changes)",
            hint="edit the workflow first, or name the pivot with --node",
        )
    if not candidates:
        names = ", ".join(c.node for c in ignored)
        raise AutoRefusedError(
            f"the edit affects only nodes this run never executed ({names}); nothing to rewind",
            hint="resume with --force to run the edited workflow from the checkpoint",
        )
    nodes = [c.node for c in candidates]
    covering = [n for n in nodes if _covers(wf, n, nodes)]
    if not covering:
        names = ", ".join(nodes)
        routers = {promote(wf, n).pivot for n in nodes}
        if len(routers) == 1 and (router := routers.pop()) not in nodes:
            hint = f"rewind with --node {router} to replay the whole fan-out, or pick one node with --node"
        else:
            hint = "pick the node to replay from with --node"
        raise AutoRefusedError(
            f"the edit affects nodes on independent branches ({names}): no single pivot covers them",
            hint=hint,
            candidates=tuple(nodes),
        )
    # `nodes` is in execution order, so the first covering node is the earliest executed.
    return AutoSelection(pivot=covering[0], candidates=candidates, ignored=ignored)
