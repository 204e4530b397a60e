"""Calling a backend for a node: backend choice, the request, budget charging, error mapping."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from iterion.backends.choice import CLAW, Choice, is_auto, resolve_backend
from iterion.budget import BudgetExceeded
from iterion.engine.cancel import call_cancellable
from iterion.engine.context import ExecContext, NodeCall
from iterion.engine.errors import NodeFailure, ShellTimeout
from iterion.envsubst import expand_node
from iterion.failure_codes import FailureCode
from iterion.ir import Node, NodeKind, Schema
from iterion.sandbox import Role

DEFAULT_SUPERVISOR_MODEL = "anthropic/claude-sonnet-4-6"


def backend_choice(ctx: ExecContext, node: Node) -> Choice:
    """The backend ``node`` runs on and why: the one resolution order (iterion/backends/choice.py)
    over this run's --backend, the node, the workflow, the script file and the environment, now."""
    return resolve_backend(os.environ, override=ctx.options.backend, node_backend=node.backend,
                           workflow_backend=ctx.workflow.default_backend, node_id=node.id,
                           script_file=ctx.options.script_file)


def _effort(value: str | None) -> str | None:
    """A quoted reasoning_effort is env-expanded when the node runs; an invalid result means the
    provider default (docs/language.md 1.7)."""
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
    """May an agent or judge ask questions, and who answers (docs/language.md §2.4): its own
    ``interaction``, else the workflow's, else none; an explicit ``none`` counts as unset
    (as observed, §2.13)."""
    own = node.interaction if node.interaction not in (None, "none") else None
    return own or ctx.workflow.interaction or "none"


def node_model(node: Node, model: str | None = None, backend: str | None = None) -> str | None:
    """The model a call uses, ``${...}`` expanded now (docs/language.md §1.7): ``model`` when given (a
    human's ``interaction_model``), else the node's. Without one, ``ITERION_DEFAULT_SUPERVISOR_MODEL``,
    else the default supervisor, for an llm router whose own backend is unset or ``auto`` (§2.5)
    and for any agent, judge or router running on claw (``backend``, canonical), which cannot call
    a provider without a model: C018 let such a node through because a credential was detected."""
    spec = model or node.model
    if not spec and node.kind in (NodeKind.AGENT, NodeKind.JUDGE, NodeKind.ROUTER) and (
            backend == CLAW or (node.kind is NodeKind.ROUTER and is_auto(expand_node(node.backend or "", os.environ)))):
        spec = os.environ.get("ITERION_DEFAULT_SUPERVISOR_MODEL") or DEFAULT_SUPERVISOR_MODEL
    return expand_node(spec, os.environ) if spec else spec


def call_backend(ctx: ExecContext, node: Node, iteration: int, *, system: str, user: str,
                 schema: Schema | None, choices: list[str] | None = None,
                 prior: tuple[str, Any] | None = None, call: NodeCall | None = None, model: str | None = None,
                 allow_ask: bool | None = None) -> Any:
    """One backend call; tokens and cost are charged to the run budget (even when over a cap,
    and even when the call failed after consuming them). The claw backend charges each of its
    turns as it goes (``agent_host``) and returns a response that carries none."""
    from iterion.backends.base import BackendError, BackendRequest
    from iterion.backends.registry import canonical_name

    choice = backend_choice(ctx, node)
    name = choice.name
    try:
        canonical = canonical_name(name)
    except BackendError as exc:  # one line: the name, where it came from, the known ones
        raise NodeFailure(exc.code, f"node {node.id}: {exc.message} (from {choice.source})",
                          node=node.id) from None
    backend = get_backend(ctx, name)
    host = agent_host(ctx, node, iteration, name, call) if canonical == "claw" else None
    if canonical == "openai":  # the streamed answer's progress and a cut answer reach the timeline
        host = SimpleNamespace(emit=lambda t, p: ctx.emit(t, node.id, iteration, p), check=ctx.token.check)
    flags: tuple[str, ...] = ()
    if canonical == "claude_code":
        from iterion.permissions import claude_code_flags

        flags = tuple(claude_code_flags(permission_policy(ctx)))
    elif canonical == "codex":
        from iterion.permissions import codex_flags

        flags = tuple(codex_flags(permission_policy(ctx), readonly=node.readonly))
    model = node_model(node, ctx.options.model or model, canonical)  # --model wins over the source
    request = BackendRequest(
        node_id=node.id, iteration=iteration, node_kind=node.kind,
        model=model,
        system=system, user=user, output_schema=schema, tools=tuple(node.tools), max_tokens=node.max_tokens,
        reasoning_effort=_effort(node.reasoning_effort), session_id=ctx.state.sessions.get(node.id),
        prior_question=prior[0] if prior else None, prior_answer=prior[1] if prior else None,
        allow_ask_user=interaction_mode(ctx, node) != "none" if allow_ask is None else allow_ask,
        choices=tuple(choices or ()), multi=node.multi, workspace_dir=str(ctx.workspace), run_id=ctx.run_id,
        provider=expand_node(node.provider or "", os.environ) or None, tool_max_steps=node.tool_max_steps, host=host, permission_flags=flags,
        wrap_argv=(lambda argv: ctx.wrap(argv, node.id, Role.AGENT_CLI, backend=canonical))
        if canonical in ("claude_code", "codex") else None,
    )
    if canonical in ("claude_code", "codex"):
        # the CLI's process group: ended (SIGTERM, grace, SIGKILL) before a cancel or the duration
        # cap is recorded, and known to the run document while it lives
        from dataclasses import replace

        from iterion.engine.children import CallProcesses

        request = replace(request, processes=CallProcesses(ctx.token))
    try:
        response = call_cancellable(lambda: backend.complete(request), ctx.token, check=ctx.duration_guard(node.id),
                                    on_abandon=request.processes.stop if request.processes is not None else None)
    except BackendError as exc:
        _charge(ctx, node, iteration, name, model, exc.tokens_in, exc.tokens_out, exc.cost_usd)
        raise NodeFailure(exc.code, f"node {node.id} ({name} backend): {exc.message}", node=node.id,
                          origin="backend", retry_after_s=exc.retry_after_s) from None
    if response.session_id:
        with ctx.state.lock:
            ctx.state.sessions[node.id] = response.session_id
    if not response.raw.get("charged"):
        _charge(ctx, node, iteration, name, model, response.tokens_in, response.tokens_out, response.cost_usd)
    return response


def permission_policy(ctx: ExecContext) -> Any:
    """The effective tool-permission policy: the workflow's ``permission:`` block, then the
    launch's and each resume's ``--permission*`` layers (iterion/permissions.py)."""
    from iterion.permissions import PermissionError_, build_policy

    try:
        return build_policy(ctx.workflow.extra.get("permission"), ctx.options.permission_layers)
    except PermissionError_ as exc:
        raise NodeFailure(FailureCode.TEMPLATE_FAILED, exc.message) from None


def mcp_servers_of(ctx: ExecContext, node: Node) -> tuple[str, ...]:
    """The MCP servers a node uses: its (else the workflow's) ``mcp.servers``, and every server its
    ``tools:`` names as ``mcp.SERVER.TOOL`` / ``mcp.SERVER.*``; minus ``mcp.disable``."""
    block = node.extra.get("mcp") or ctx.workflow.extra.get("mcp") or {}
    names: list[str] = []
    if isinstance(block, dict):
        names += [str(n) for n in block.get("servers") or []]
    for t in node.tools:
        parts = t.split(".")
        if len(parts) >= 2 and parts[0] == "mcp" and parts[1] != "*":
            names.append(parts[1])
    disabled = set(block.get("disable") or []) if isinstance(block, dict) else set()
    return tuple(dict.fromkeys(n for n in names if n not in disabled))


def agent_host(ctx: ExecContext, node: Node, iteration: int, name: str, call: NodeCall | None) -> Any:
    """What the in-process claw agent may do to the run: events, budget, cancel, shell, policy."""
    from iterion.backends.claw.host import AgentHost
    from iterion.backends.claw.tools import ShellResult
    from iterion.engine.errors import ToolLaunchError
    from iterion.engine.toolproc import run_process

    guard = ctx.duration_guard(node.id)
    env = ctx.tool_env(node.id, iteration)

    def check() -> None:
        ctx.token.check()
        if guard is not None:
            guard()

    def run_shell(command: str, cwd: Path, timeout_s: float) -> ShellResult:
        deadline = time.monotonic() + timeout_s

        def tick() -> None:
            if guard is not None:
                guard()
            if time.monotonic() > deadline:
                raise ShellTimeout()

        try:
            res = run_process(ctx.wrap(["/bin/sh", "-c", command], node.id, Role.AGENT_BASH), cwd=cwd, env=env,
                              token=ctx.token, check=tick, what=f"agent {node.id} shell")
        except ShellTimeout:  # run_process killed the process group before re-raising
            return ShellResult("", "", -1, timed_out=True)
        except ToolLaunchError as exc:
            return ShellResult("", str(exc), 127)
        setup = ctx.sandbox.setup_failed(node.id, res.exit_code, res.stderr) if ctx.sandbox else None
        if setup is not None:  # never run unsandboxed: the node fails, typed
            raise NodeFailure(FailureCode.SANDBOX_SETUP_FAILED,
                              f"node {node.id}: the sandbox of its bash tool did not start: {setup}", node=node.id)
        if res.children_left is not None:
            ctx.emit("tool_children_left", node.id, iteration, res.children_left.payload())
        return ShellResult(res.stdout, res.stderr, res.exit_code)

    def charge(model: str | None, tin: int, tout: int, cost: float) -> None:
        _charge(ctx, node, iteration, name, model or node_model(node, None, CLAW), tin, tout, cost)

    wf_servers = ctx.workflow.extra.get("mcp_server") or {}
    pending_ours = call is not None and call.pending is not None and call.pending.node == node.id \
        and call.pending.kind == "ask_user"
    inherit = (call.input.get("_session_id") if call is not None else None) or None
    return AgentHost(
        workspace=ctx.workspace, emit=lambda t, p: ctx.emit(t, node.id, iteration, p), charge=charge, check=check,
        run_shell=run_shell, conversations_dir=ctx.run_dir / "conversations", policy=permission_policy(ctx),
        mcp_declarations=wf_servers if isinstance(wf_servers, dict) else {}, mcp_servers=mcp_servers_of(ctx, node),
        resuming=pending_ours, answers=call.answers if pending_ours and call is not None else None,
        session_mode=node.session or "fresh", inherit_session=str(inherit) if inherit else None, env=env,
        protected_dirs=(ctx.store.root,))


def _charge(ctx: ExecContext, node: Node, iteration: int, name: str, model: str | None, tokens_in: int,
            tokens_out: int, cost: float) -> None:
    tokens = tokens_in + tokens_out
    # input/output apart: telemetry's GenAI spans report both (iterion/telemetry/otel.py)
    ctx.emit("backend_call", node.id, iteration, {"backend": name, "model": model, "tokens": tokens,
                                                  "input_tokens": tokens_in, "output_tokens": tokens_out,
                                                  "cost_usd": cost})
    try:
        ctx.budget.charge(tokens=tokens, cost_usd=cost)
    except BudgetExceeded as exc:
        ctx.emit("budget_exceeded", node.id, iteration, {"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed})
        raise NodeFailure(FailureCode.BUDGET_EXCEEDED, exc.message, node=node.id,
                          details={"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed}) from None
