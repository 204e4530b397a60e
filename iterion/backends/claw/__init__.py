"""The ``claw`` backend: the in-process coding agent (a tool loop over OpenAI-compatible chat
completions or the Anthropic messages API, workspace tools, ask_user, permissions, MCP).

Configuration as the ``openai`` backend: ``$OPENAI_BASE_URL`` / ``$OPENAI_API_KEY``; and for the
Anthropic wire format ``$ANTHROPIC_BASE_URL`` / ``$ANTHROPIC_API_KEY``. ``provider:`` or a
``provider/model`` prefix chooses the format (``iterion.backends.claw.wire.resolve_provider``).

Only this module is imported with the registry; httpx, the loop and the MCP SDK load on the
first call (CLI start-up stays light).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iterion.backends.base import Backend, BackendError, BackendRequest, BackendResponse, call_timeout_s
from iterion.failure_codes import FailureCode

__all__ = ["ClawBackend"]


class ClawBackend(Backend):
    name = "claw"

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self._wires: dict[str, Any] = {}

    def wires(self) -> dict[str, Any]:
        """The two wire formats, built on first use with the call limit read then (a garbage
        $ITERION_OPENAI_TIMEOUT: BackendError BACKEND_UNAVAILABLE, the node fails naming it)."""
        if not self._wires:
            from iterion.backends.claw.wire import AnthropicWire, OpenAIWire
            from iterion.backends.jsonout import json_mode

            timeout_s = call_timeout_s(self.options)
            self._wires = {"openai": OpenAIWire(timeout_s, self.options.get("base_url"),
                                                self.options.get("api_key"), json_mode(self.options)),
                           "anthropic": AnthropicWire(timeout_s, self.options.get("anthropic_base_url"),
                                                      self.options.get("anthropic_api_key"))}
        return self._wires

    def availability(self) -> tuple[bool, str]:
        try:
            self.wires()
        except BackendError as exc:  # a garbage setting: "not configured", said as is
            return False, exc.message
        found = {name: w.availability() for name, w in self.wires().items()}
        usable = [f"{n}: {why}" for n, (ok, why) in found.items() if ok]
        if usable:
            return True, "; ".join(usable)
        return False, "; ".join(why for _ok, why in found.values())

    def complete(self, request: BackendRequest) -> BackendResponse:
        from iterion.backends.claw.host import AgentHost
        from iterion.backends.claw.loop import run_agent

        host = request.host
        if host is None:  # called outside the engine (a plain request): tools confined to the workspace dir
            if not request.workspace_dir:
                raise BackendError(FailureCode.BACKEND_UNAVAILABLE, "the claw backend needs a workspace")
            from pathlib import Path

            host = AgentHost(workspace=Path(request.workspace_dir), emit=lambda _t, _p: None,
                             charge=lambda *_a: None)
        return run_agent(request, host, self.wires())

    def close(self) -> None:
        for w in self._wires.values():
            w.close()
        self._wires = {}
