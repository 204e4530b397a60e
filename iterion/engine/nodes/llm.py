"""agent / judge: one backend call with the rendered prompts; structured output is validated
against the output schema (SCHEMA_VALIDATION otherwise). An ``ask_user`` question is answered
by the interaction model (``interaction: llm``, or ``llm_or_human`` unless it escalates), else
parks the node (it has not completed) and the resume re-invokes it with the answer."""

from __future__ import annotations

import json
from typing import Any

from gitrefs.persist.envsettings import EnvSettingError
from iterion.engine.coerce import validate_output
from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.declared import runtime_fields, with_calibration
from iterion.engine.errors import NodeFailure
from iterion.engine.nodes.llmcall import call_backend, interaction_mode
from iterion.engine.outputcap import TRUNCATED_KEY, inline_cap, output_prefix, spill_text
from iterion.failure_codes import FailureCode

# questions a model answers for one node visit before the node must answer itself
MAX_MODEL_ANSWERS = 8


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    node = call.node
    system = with_calibration(ctx.workflow, node, render_text(node.system, call.scope, node.id, "system prompt"))
    user = render_text(node.user, call.scope, node.id, "user prompt")
    prior = None
    if call.pending is not None and call.pending.kind == "ask_user" and call.answers is not None:
        question = str(call.pending.questions.get("question", ""))
        prior = (question, call.answers.get("answer", call.answers))
    mode = interaction_mode(ctx, node)
    for _ in range(MAX_MODEL_ANSWERS + 1):
        response = call_backend(ctx, node, call.iteration, system=system, user=user, schema=node.output_schema,
                                prior=prior, call=call)
        ask = getattr(response, "ask_user", None)
        raw = getattr(response, "raw", None) or {}
        if ask and raw.get("pause_kind") == "permission":
            # a permission `ask` (claw): the call is shown; resume with approve=yes|no or an allow rule
            return NodeResult({}, pause={"question": ask, "permission": raw.get("permission")},
                              pause_kind="ask_user", session_id=getattr(response, "session_id", None))
        if not ask or mode == "none":
            break
        answer = None if mode == "human" else _model_answer(ctx, call, str(ask), escalate=mode == "llm_or_human")
        if answer is None:  # a person answers: the node parks and the resume re-invokes it
            # claw: the tool-use id the answer will be the result of (the conversation is on disk)
            pause = {"question": ask, **({"tool_use_id": raw["tool_use_id"]} if raw.get("tool_use_id") else {})}
            return NodeResult({}, pause=pause, pause_kind="ask_user",
                              session_id=getattr(response, "session_id", None))
        prior = (str(ask), answer)
    output = response.output if node.output_schema is not None else response.as_output()
    if output is None:
        output = _parse_json(response.text)
    output = validate_output(node.id, node.output_schema, output)
    if node.output_schema is None and isinstance(output, dict):
        output = _bounded_answer(ctx, call, output)
    if isinstance(output, dict):  # the runtime `_` fields (docs/language.md §5.1), never overriding the model's own
        output = {**runtime_fields(response), **output}
    return NodeResult(output, session_id=getattr(response, "session_id", None))


def _bounded_answer(ctx: ExecContext, call: NodeCall, output: dict[str, Any]) -> dict[str, Any]:
    """An answer text over the inline cap: kept whole beside the run, its head inline and marked
    (``iterion.engine.outputcap``)."""
    text = output.get("text")
    if not isinstance(text, str):
        return output
    try:
        budget = inline_cap()
    except EnvSettingError as exc:
        raise NodeFailure(FailureCode.EXECUTION_FAILED, f"{exc.message} ({exc.hint})", node=call.node.id) from None
    prefix = output_prefix(ctx.run_dir, call.node.id, call.iteration)
    path = prefix.with_name(prefix.name + ".answer")
    kept = spill_text(text, path, budget)
    if kept is None:
        return output
    return {**output, "text": kept.text, TRUNCATED_KEY: {"text": kept.mark()}}


def _model_answer(ctx: ExecContext, call: NodeCall, question: str, *, escalate: bool) -> str | None:
    """The answer the interaction model (``interaction_model``, else ``model``) gives to the
    node's question, guided by ``interaction_prompt`` (docs/language.md §2.4); None when it escalates
    to a person (``llm_or_human`` only)."""
    node = call.node
    guide = render_text(node.interaction_prompt, call.scope, node.id, "interaction prompt") or \
        "An agent working on a task asks the question below. Answer it briefly and directly."
    response = call_backend(ctx, node, call.iteration, system=guide, user=question, schema=None,
                            model=node.interaction_model, allow_ask=escalate)
    if escalate and getattr(response, "ask_user", None):
        return None
    text = response.text if response.text is not None else response.output
    return text if isinstance(text, str) else json.dumps(text)


def _parse_json(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except json.JSONDecodeError:
        return text
