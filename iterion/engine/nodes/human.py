"""human: parks the run for answers (``interaction: human``), or lets a model answer
(``llm``), or lets the model decide whether to ask (``llm_or_human``). Answers given on resume
(or up front with --answers-file) become the node's typed output."""

from __future__ import annotations

from typing import Any

from iterion.engine.coerce import coerce_answers, validate_output
from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.errors import AnswerError, NodeFailure
from iterion.engine.nodes.llmcall import call_backend
from iterion.failure_codes import FailureCode


def questions(call: NodeCall, instructions: str) -> dict[str, Any]:
    node = call.node
    fields = []
    if node.output_schema is not None:
        for f in node.output_schema.fields:
            entry: dict[str, Any] = {"name": f.name, "type": f.type.value}
            if f.enum:
                entry["enum"] = list(f.enum)
            fields.append(entry)
    return {"instructions": instructions, "fields": fields, "input": call.input}


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    node = call.node
    answers = call.answers
    if answers is None and node.id in ctx.options.answers:
        answers = ctx.options.answers[node.id]
    if answers is not None:
        try:
            return NodeResult(coerce_answers(node.id, node.output_schema, answers))
        except AnswerError as exc:
            raise NodeFailure(FailureCode.SCHEMA_VALIDATION, str(exc), node=node.id) from None
    instructions = render_text(node.instructions, call.scope, node.id, "instructions")
    mode = node.interaction or ctx.workflow.interaction or "human"
    if mode in ("llm", "llm_or_human"):
        response = call_backend(ctx, node, call.iteration, system=instructions,
                                user=render_text(node.user, call.scope, node.id, "user prompt") or instructions,
                                schema=node.output_schema, model=node.interaction_model)
        ask = getattr(response, "ask_user", None)
        output = getattr(response, "output", None)
        if mode == "llm" or (not ask and output is not None):
            return NodeResult(validate_output(node.id, node.output_schema, output))
    return NodeResult({}, pause=questions(call, instructions), pause_kind="human")
