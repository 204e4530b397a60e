"""compute: each output field is an expression; no shell, no model. Errors are EXPRESSION_FAILED."""

from __future__ import annotations

from typing import Any

from iterion.engine.coerce import validate_output
from iterion.engine.context import ExecContext, NodeCall, NodeResult
from iterion.engine.errors import NodeFailure
from iterion.failure_codes import FailureCode


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    from iterion.expr import ExprError, evaluate

    node = call.node
    out: dict[str, Any] = {}
    for field, src in node.exprs.items():
        try:
            out[field] = evaluate(src, call.scope)
        except ExprError as exc:
            raise NodeFailure(FailureCode.EXPRESSION_FAILED,
                              f"compute {node.id}: field {field} = {src!r}: {exc.message}", node=node.id,
                              details={"field": field, "expr": src}) from None
    if node.output_schema is not None:
        try:
            out = validate_output(node.id, node.output_schema, out)
        except NodeFailure as exc:
            # same inputs, same verdict: a compute type mismatch is deterministic
            raise NodeFailure(FailureCode.EXPRESSION_FAILED, exc.message, node=node.id, details=exc.details) from None
    return NodeResult(out)
