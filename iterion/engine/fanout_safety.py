"""Fan-out workspace safety: at most one branch of a fan-out may mutate the workspace.

docs/language.md §3 (Fan-out): "At most one branch may mutate the workspace (an agent or human with write
tools, not `readonly`): a fan-out with two or more mutating branches is refused when it is
reached, before any branch runs, with `WORKSPACE_SAFETY` (`failed_resumable`; the message
names the branches)". Tool nodes are not counted (the rule names agents and humans only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from iterion.engine.errors import NodeFailure
from iterion.failure_codes import FailureCode
from iterion.ir import TERMINALS, Node, NodeKind, Workflow

# the workspace tools that write (iterion/backends/claw/tools.py): a `tools:` entry naming one,
# or a pattern matching one (`*`), grants writing
WRITE_TOOLS = ("write_file", "edit_file", "bash")


def is_mutating(node: Node) -> bool:
    if node.readonly or node.kind not in (NodeKind.AGENT, NodeKind.JUDGE, NodeKind.HUMAN):
        return False
    return any(fnmatchcase(tool, pattern) for pattern in node.tools for tool in WRITE_TOOLS)


def branch_bodies(wf: Workflow, router: str, targets: Sequence[str], join: str | None) -> list[list[str]]:
    """Per target: the nodes its branch can run before the convergence node ``join``."""
    succ: dict[str, list[str]] = {}
    for e in wf.edges:
        succ.setdefault(e.src, []).append(e.dst)
    bodies: list[list[str]] = []
    for t in targets:
        seen: list[str] = []
        marked: set[str] = set()
        stack = [t]
        while stack:
            n = stack.pop()
            if n in TERMINALS or n not in wf.nodes or n in marked or n == join or n == router:
                continue
            marked.add(n)
            seen.append(n)
            stack.extend(succ.get(n, ()))
        bodies.append(seen)
    return bodies


def refuse_mutating_branches(wf: Workflow, router: str, targets: Sequence[str],
                             bodies: Iterable[Sequence[str]]) -> None:
    """Raise WORKSPACE_SAFETY when two or more branches hold a mutating node."""
    mutating: list[tuple[str, str]] = []  # (branch target, first mutating node)
    for target, body in zip(targets, bodies, strict=True):
        node = next((n for n in body if is_mutating(wf.nodes[n])), None)
        if node is not None:
            mutating.append((target, node))
    if len(mutating) < 2:
        return
    named = ", ".join(f"-> {t} ({n} writes)" for t, n in mutating)
    raise NodeFailure(FailureCode.WORKSPACE_SAFETY,
                      f"fan-out {router}: {len(mutating)} branches would mutate the workspace at once: {named}; "
                      "at most one may (mark the others readonly: true, or drop their write tools)",
                      node=router, details={"branches": [t for t, _ in mutating],
                                            "mutating_nodes": [n for _, n in mutating]})
