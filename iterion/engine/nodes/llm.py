"""agent / judge: one backend call with the rendered prompts; structured output is validated
against the output schema (SCHEMA_VALIDATION otherwise). An ``ask_user`` question parks the
node (it has not completed) and the resume re-invokes it with the answer."""

from __future__ import annotations

import json
from typing import Any

from iterion.engine.coerce import validate_output
from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.declared import runtime_fields, with_calibration
from iterion.engine.nodes.llmcall import call_backend


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    node = call.node
    system = with_calibration(ctx.workflow, node, render_text(node.system, call.scope, node.id, "system prompt"))
    user = render_text(node.user, call.scope, node.id, "user prompt")
    prior = None
    if call.pending is not None and call.pending.kind == "ask_user" and call.answers is not None:
        question = str(call.pending.questions.get("question", ""))
        prior = (question, call.answers.get("answer", call.answers))
    response = call_backend(ctx, node, call.iteration, system=system, user=user, schema=node.output_schema,
                            prior=prior)
    ask = getattr(response, "ask_user", None)
    if ask and (node.interaction or "none") != "none":
        return NodeResult({}, pause={"question": ask}, pause_kind="ask_user",
                          session_id=getattr(response, "session_id", None))
    output = response.output if node.output_schema is not None else response.as_output()
    if output is None:
        output = _parse_json(response.text)
    output = validate_output(node.id, node.output_schema, output)
    if isinstance(output, dict):  # the runtime `_` fields (dsl.md §5.1), never overriding the model's own
        output = {**runtime_fields(response), **output}
    return NodeResult(output, session_id=getattr(response, "session_id", None))


def _parse_json(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except json.JSONDecodeError:
        return text
