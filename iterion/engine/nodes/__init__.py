"""One executor per node kind: ``execute(ctx, call) -> NodeResult``."""

from __future__ import annotations

from collections.abc import Callable

from iterion.engine.context import ExecContext, NodeCall, NodeResult
from iterion.ir import NodeKind

Executor = Callable[[ExecContext, NodeCall], NodeResult]


def executor_for(kind: NodeKind) -> Executor:
    from iterion.engine.nodes import compute, human, llm, router, subbot, tool

    table: dict[NodeKind, Executor] = {
        NodeKind.TOOL: tool.execute,
        NodeKind.COMPUTE: compute.execute,
        NodeKind.AGENT: llm.execute,
        NodeKind.JUDGE: llm.execute,
        NodeKind.ROUTER: router.execute,
        NodeKind.HUMAN: human.execute,
        NodeKind.SUBBOT: subbot.execute,
    }
    return table[kind]
