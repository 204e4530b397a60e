"""Calling a backend for a node: backend choice, the request, budget charging, error mapping."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from iterion.budget import BudgetExceeded
from iterion.engine.cancel import call_cancellable
from iterion.engine.context import ExecContext
from iterion.engine.errors import NodeFailure
from iterion.envsubst import expand_node
from iterion.failure_codes import FailureCode
from iterion.ir import Node, NodeKind, Schema

SCRIPT = "script"
DEFAULT_SUPERVISOR_MODEL = "anthropic/claude-sonnet-4-6"


def backend_name(ctx: ExecContext, node: Node) -> str:
    """--backend wins, then the node's own, then the workflow default, then the script backend
    when answers were supplied, else openai (the one that needs only an endpoint and a key)."""
    name = ctx.options.backend or expand_node(node.backend or "", os.environ) or \
        expand_node(ctx.workflow.default_backend or "", os.environ)
    if name:
        return name
    if ctx.options.script_file or os.environ.get("ITERION_SCRIPT_FILE"):
        return SCRIPT
    return "openai"


def _effort(value: str | None) -> str | None:
    """A quoted reasoning_effort is env-expanded when the node runs; an invalid result means the
    provider default (dsl.md 1.7)."""
    if not value or "$" not in value:
        return value
    got = expand_node(value, os.environ)
    return got if got in ("low", "medium", "high", "xhigh", "max") else None


def get_backend(ctx: ExecContext, name: str) -> Any:
    backend = ctx.backend_cache.get(name)
    if backend is not None:
        return backend
    from iterion.backends.base import BackendError
    from iterion.backends.registry import get_backend as registry_get

    options: dict[str, Any] = {"workspace": str(ctx.workspace)}
    if ctx.options.script_file:
        options["script_file"] = str(Path(ctx.options.script_file))
    try:
        backend = registry_get(name, options)
    except BackendError as exc:
        raise NodeFailure(exc.code, exc.message) from None
    except (KeyError, ValueError) as exc:
        raise NodeFailure(FailureCode.BACKEND_UNAVAILABLE, str(exc)) from None
    ctx.backend_cache[name] = backend
    return backend


def interaction_mode(ctx: ExecContext, node: Node) -> str:
    """May an agent or judge ask questions, and who answers (dsl.md §2.4): its own
    ``interaction``, else the workflow's, else none; an explicit ``none`` counts as unset
    (as observed, §2.13)."""
    own = node.interaction if node.interaction not in (None, "none") else None
    return own or ctx.workflow.interaction or "none"


def node_model(node: Node, model: str | None = None) -> str | None:
    """The model a call uses, ``${...}`` expanded now (dsl.md §1.7): ``model`` when given (a
    human's ``interaction_model``), else the node's; an llm router with neither model nor
    backend takes ``ITERION_DEFAULT_SUPERVISOR_MODEL``, else the default supervisor (§2.5)."""
    spec = model or node.model
    if not spec and node.kind is NodeKind.ROUTER and not node.backend:
        spec = os.environ.get("ITERION_DEFAULT_SUPERVISOR_MODEL") or DEFAULT_SUPERVISOR_MODEL
    return expand_node(spec, os.environ) if spec else spec


def call_backend(ctx: ExecContext, node: Node, iteration: int, *, system: str, user: str,
                 schema: Schema | None, choices: list[str] | None = None,
                 prior: tuple[str, Any] | None = None, model: str | None = None,
                 allow_ask: bool | None = None) -> Any:
    """One backend call; tokens and cost are charged to the run budget (even when over a cap,
    and even when the call failed after consuming them)."""
    from iterion.backends.base import BackendError, BackendRequest

    name = backend_name(ctx, node)
    backend = get_backend(ctx, name)
    model = node_model(node, model)
    request = BackendRequest(
        node_id=node.id, iteration=iteration, node_kind=node.kind,
        model=model,
        system=system, user=user, output_schema=schema, tools=tuple(node.tools), max_tokens=node.max_tokens,
        reasoning_effort=_effort(node.reasoning_effort), session_id=ctx.state.sessions.get(node.id),
        prior_question=prior[0] if prior else None, prior_answer=prior[1] if prior else None,
        allow_ask_user=interaction_mode(ctx, node) != "none" if allow_ask is None else allow_ask,
        choices=tuple(choices or ()), multi=node.multi, workspace_dir=str(ctx.workspace), run_id=ctx.run_id,
    )
    try:
        response = call_cancellable(lambda: backend.complete(request), ctx.token, check=ctx.duration_guard(node.id))
    except BackendError as exc:
        _charge(ctx, node, iteration, name, model, exc.tokens_in + exc.tokens_out, exc.cost_usd)
        raise NodeFailure(exc.code, f"node {node.id} ({name} backend): {exc.message}", node=node.id,
                          origin="backend", retry_after_s=exc.retry_after_s) from None
    if response.session_id:
        with ctx.state.lock:
            ctx.state.sessions[node.id] = response.session_id
    _charge(ctx, node, iteration, name, model, response.tokens, response.cost_usd)
    return response


def _charge(ctx: ExecContext, node: Node, iteration: int, name: str, model: str | None, tokens: int,
            cost: float) -> None:
    ctx.emit("backend_call", node.id, iteration, {"backend": name, "model": model, "tokens": tokens,
                                                  "cost_usd": cost})
    try:
        ctx.budget.charge(tokens=tokens, cost_usd=cost)
    except BudgetExceeded as exc:
        ctx.emit("budget_exceeded", node.id, iteration, {"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed})
        raise NodeFailure(FailureCode.BUDGET_EXCEEDED, exc.message, node=node.id,
                          details={"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed}) from None
