"""The run-time side of declarations (docs/language.md §1.7, §2.4, §2.9, §2.10, §5.1).

- ``with_calibration``: the fragments a node's ``cursors:`` select, appended to its system
  prompt under ``## Calibration``.
- ``runtime_fields``: the ``_``-prefixed fields an LLM node adds to its output
  (``_session_id``).
- ``not_enforced``: the declared blocks this engine parses and checks but does not execute
  (compaction, memory, tool_policy, capabilities; ``mcp`` / ``mcp_server`` unless a
  node runs on the claw backend, the only one that starts MCP servers), each named once so a run
  says so instead of ignoring them silently. ``permission:`` is enforced (the claw agent's tool
  calls, the claude_code CLI's flags); the codex CLI gets only its mode, so the workflow's rules
  are named for each node that runs on codex.

Pure functions of the workflow, the node and the environment: nothing here writes state, so a
crash at any point leaves nothing to repair.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from iterion.backends.choice import declared_backend
from iterion.dsl.blocks import calibration_section
from iterion.envsubst import expand_node
from iterion.ir import Node, Workflow

FEATURE_NOT_ENFORCED = "feature_not_enforced"
# blocks parsed, checked and kept, but not executed by this engine (yet)
NOT_ENFORCED_BLOCKS = ("compaction", "memory", "tool_policy", "capabilities")
_WORKFLOW_ONLY: tuple[str, ...] = ()
CLAW = "claw"  # the backend that executes mcp / mcp_server (iterion/backends/claw)
CODEX = "codex"  # takes the permission mode as its sandbox, not the rules (iterion.permissions.codex_flags)


def _static_backend(wf: Workflow, node: Node) -> str:
    """The backend a node names in the source (its own, else the workflow default, "auto" and empty
    skipped), as written; "" when the run decides."""
    return declared_backend(node.backend, wf.default_backend) or ""


def with_calibration(wf: Workflow, node: Node, system: str, env: Mapping[str, str] | None = None) -> str:
    """``system`` with the node's cursor fragments appended (sorted by cursor name); values
    holding ``${...}`` are expanded now; an unresolvable value is skipped (docs/language.md §2.10)."""
    if not node.cursors:
        return system
    cursors = wf.extra.get("cursor") or {}
    env = os.environ if env is None else env
    settings = {k: expand_node(v, env) if isinstance(v, str) else v for k, v in node.cursors.items()}
    section = calibration_section(cursors, settings)
    if not section:
        return system
    return f"{system.rstrip()}\n\n{section}" if system.strip() else section


def runtime_fields(response: Any) -> dict[str, Any]:
    """The ``_`` fields an LLM node adds to its output (exempt from schema checks, §5.1):
    ``_session_id`` when the backend keeps a session, so an edge can pass it on
    (``with { _session_id: "{{outputs.draft._session_id}}" }``). Usage (tokens, cost, model,
    backend) is in the run's ``backend_call`` events, not in the output."""
    session = getattr(response, "session_id", None)
    return {"_session_id": session} if session else {}


def not_enforced(wf: Workflow, backend_of: Callable[[Node], str] | None = None) -> list[dict[str, Any]]:
    """One entry per declared-but-not-executed block: ``{"feature", "node", "message"}``
    (``node`` None for a workflow-scope setting), in a stable order. ``backend_of``: the backend
    a node runs on (the launch passes the resolution order with its --backend and environment);
    absent, the one the source names."""
    backend_of = backend_of or (lambda n: _static_backend(wf, n))
    found: list[dict[str, Any]] = []
    for key in (*NOT_ENFORCED_BLOCKS, *_WORKFLOW_ONLY):
        if key in wf.extra:
            found.append({"feature": key, "node": None,
                          "message": f"workflow {key}: is parsed and checked but not enforced by this engine"})
    any_claw = any(backend_of(n) == CLAW for n in wf.nodes.values() if n.is_llm)
    for name in sorted(wf.extra.get("mcp_server") or {}):
        if not any_claw:
            found.append({"feature": "mcp_server", "node": None, "server": name,
                          "message": f"mcp_server {name} is declared but only a claw node starts MCP servers"})
    if "mcp" in wf.extra and not any_claw:
        found.append({"feature": "mcp", "node": None,
                      "message": "workflow mcp: is parsed and checked but only the claw backend uses MCP servers"})
    permission = wf.extra.get("permission")
    has_rules = isinstance(permission, Mapping) and any(permission.get(k) for k in ("allow", "ask", "deny"))
    for nid in sorted(wf.nodes):
        node = wf.nodes[nid]
        if has_rules and node.is_llm and backend_of(node) == CODEX:
            found.append({"feature": "permission", "node": nid,
                          "message": f"permission: rules are not passed to node {nid}'s codex CLI "
                                     "(only the mode, as its --sandbox)"})
        if "mcp" in node.extra and (not node.is_llm or backend_of(node) != CLAW):
            found.append({"feature": "mcp", "node": nid,
                          "message": f"mcp: of node {nid} is only executed by the claw backend"})
        for key in NOT_ENFORCED_BLOCKS:
            if key in node.extra:
                found.append({"feature": key, "node": nid,
                              "message": f"{key}: of node {nid} is parsed and checked but not enforced by this engine"})
    return found


def with_value(template: str, scope: Mapping[str, Any], source_output: Mapping[str, Any], node: str,
               what: str) -> Any:
    """One `with` value (docs/language.md §3.6): exactly one ``{{ref}}`` and nothing else is the value
    itself, typed (map, list, number...); otherwise the rendered string (text around a
    reference and several references are rendered: a deliberate difference, §9).
    ``{{input.X}}`` reads the edge source's output, falling back to the scope's input."""
    from iterion.engine.context import render_text
    from iterion.expr import Reference, resolve_reference
    from iterion.templates import TemplateRenderError, TemplateSyntaxError, parse_template

    local = {**scope, "input": {**dict(scope.get("input") or {}), **dict(source_output)}}
    try:
        pieces = parse_template(template)
    except TemplateSyntaxError:
        pieces = []
    if len(pieces) == 1 and isinstance(pieces[0], Reference):  # `{{!ref}}` too: "`!` has no effect in with values"
        ref = pieces[0]

        def error(message: str, offset: int) -> TemplateRenderError:
            return TemplateRenderError(message, offset, ref.dotted)

        try:
            return resolve_reference(ref, local, error)
        except TemplateRenderError:
            # a node not run yet (first round of a loop), a missing field: "the referenced value
            # itself" is null (docs/language.md §3, 4: "A missing value is null"), never the marker text a
            # prompt would show the model or an expression would read as a string (issue 28)
            return None
    return render_text(template, dict(local), node, what, "with")
