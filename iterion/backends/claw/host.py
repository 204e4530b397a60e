"""What the engine lends the in-process agent. The backend imports nothing of the engine: every
effect on the run (events, budget, cancellation, the shell, the conversation store) arrives here
as a value or a callable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iterion.backends.claw.tools import RunShell
from iterion.permissions import Policy


@dataclass
class AgentHost:
    workspace: Path
    # (event type, payload) -> None: tool_called, permission_decided, mcp_server_* ...
    emit: Callable[[str, dict[str, Any]], None]
    # (model, tokens_in, tokens_out, cost_usd) -> None; raises (BUDGET_EXCEEDED) to stop the loop
    charge: Callable[[str | None, int, int, float], None]
    # raises when the run is cancelled or over its duration cap
    check: Callable[[], None] = lambda: None
    run_shell: RunShell | None = None
    conversations_dir: Path | None = None
    policy: Policy = field(default_factory=Policy)
    # mcp_server declarations of the workflow (name -> {transport, command, args, env}) and the
    # servers this node uses (its mcp.servers, plus those its tools: name)
    mcp_declarations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    mcp_servers: tuple[str, ...] = ()
    # the resume of a pause this node's conversation left pending: its answers (None when the
    # resume gave none, e.g. an allow rule added on resume)
    resuming: bool = False
    answers: dict[str, Any] | None = None
    session_mode: str = "fresh"
    inherit_session: str | None = None  # the `_session_id` an inherit/fork node continues from
    env: dict[str, str] | None = None   # where an MCP server's inherit_env names are read
    # directories the agent's file tools treat as protected besides the defaults: the run store
    protected_dirs: tuple[Path, ...] = ()
