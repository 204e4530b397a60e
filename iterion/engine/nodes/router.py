"""router: chooses the outgoing edge(s) - every one (fan_out_all), by condition, in turn
(round_robin, the position persisted in the checkpoint), or by a model (llm)."""

from __future__ import annotations

from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.edges import round_robin_edge, select_edge, warner
from iterion.engine.errors import NodeFailure
from iterion.engine.nodes.llmcall import call_backend
from iterion.failure_codes import FailureCode
from iterion.ir import Edge, RouterMode


def _summary(edges: list[Edge]) -> dict[str, object]:
    return {"selected": [e.dst for e in edges]}


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    node = call.node
    wf = ctx.workflow
    mode = node.mode or RouterMode.CONDITION
    out_edges = wf.out_edges(node.id)
    if mode is RouterMode.FAN_OUT_ALL:
        return NodeResult(_summary(out_edges), selected=list(out_edges))
    if mode is RouterMode.ROUND_ROBIN:
        edge = round_robin_edge(wf, node.id, ctx.state)
        return NodeResult(_summary([edge]), selected=[edge])
    if mode is RouterMode.CONDITION:
        # a router's output is its input: its `when` expressions read the input's fields
        edge = select_edge(wf, node.id, call.input, call.scope, ctx.state,
                           warn=warner(ctx.emit, node.id, call.iteration))
        return NodeResult(_summary([edge]), selected=[edge])
    # llm: the model names the target(s) among the edges' destinations
    choices = [e.dst for e in out_edges]
    system = render_text(node.system, call.scope, node.id, "system prompt")
    user = render_text(node.user, call.scope, node.id, "user prompt")
    response = call_backend(ctx, node, call.iteration, system=system, user=user, schema=None, choices=choices)
    picked = _picked(response)
    chosen = [e for e in out_edges if e.dst in picked]
    if not chosen:
        raise NodeFailure(FailureCode.NO_OUTGOING_EDGE,
                          f"router {node.id}: the model chose {sorted(picked) or 'nothing'}, "
                          f"not one of {', '.join(choices)}", node=node.id)
    if not node.multi:
        chosen = chosen[:1]
    result = _summary(chosen)
    reason = _reason(response)
    if reason:
        result["reason"] = reason
    return NodeResult(result, selected=chosen)


def _picked(response: object) -> set[str]:
    if getattr(response, "selected", None):
        return {str(v) for v in response.selected}  # type: ignore[attr-defined]
    out = getattr(response, "output", None)
    values: list[object] = []
    if isinstance(out, dict):
        for key in ("selected", "targets", "target", "choice", "choices"):
            if key in out:
                v = out[key]
                values = list(v) if isinstance(v, list) else [v]
                break
    elif isinstance(out, list):
        values = list(out)
    elif isinstance(out, str):
        values = [out]
    text = getattr(response, "text", None)
    if not values and isinstance(text, str):
        values = [part.strip() for part in text.replace("\n", ",").split(",")]
    return {str(v).strip() for v in values if str(v).strip()}


def _reason(response: object) -> str | None:
    out = getattr(response, "output", None)
    if isinstance(out, dict) and isinstance(out.get("reason"), str):
        return out["reason"]
    return None
