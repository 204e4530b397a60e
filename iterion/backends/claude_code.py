"""The ``claude_code`` backend: delegates a node to the ``claude`` CLI (Claude Code).

Runs ``claude -p --output-format json`` in the run's workspace with the prompt on stdin, plus
``--model=`` (an ``anthropic/`` prefix stripped), ``--append-system-prompt=``, ``--allowedTools=``
(the node's tools as Claude Code names them: ``iterion.permissions.claude_tool_names``; a name
it has no counterpart for fails the node) and ``--resume=<session>`` (the session id of an
earlier ask_user turn) when they apply. The CLI's JSON result gives the text, ``session_id``,
``usage`` and ``total_cost_usd``. A resumed session is sent only the user's answer.

Binary: ``options["claude_bin"]`` / ``$ITERION_CLAUDE_BIN`` / ``claude`` on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from iterion.backends.base import BackendError, BackendRequest, BackendResponse
from iterion.backends.cliagent import (
    CliAgentBackend,
    answer_text,
    classify,
    iterion_sandbox_active,
    resumed,
    strip_provider,
)
from iterion.backends.schema import finish_structured, output_instructions, prior_exchange
from iterion.failure_codes import FailureCode
from iterion.permissions import claude_tool_names

CLAUDE_ENV = "ITERION_CLAUDE_BIN"
INSTALL_HINT = ("install it with `npm install -g @anthropic-ai/claude-code` (then run `claude` once to log in), "
                f"point ${CLAUDE_ENV} at it, or choose another backend (claw, openai, script)")

_MARKERS: tuple[tuple[tuple[str, ...], FailureCode], ...] = (
    (("usage limit", "limit reached", "limit will reset"), FailureCode.USAGE_LIMIT_BLOCKED),
    (("rate limit", "rate_limit", "429", "overloaded"), FailureCode.RATE_LIMITED),
    (("invalid api key", "authentication", "unauthorized", "401", "403", "please run /login", "not logged in",
      "oauth token"), FailureCode.AUTH_FAILED),
    (("prompt is too long", "context length", "context window", "too many tokens"),
     FailureCode.CONTEXT_LENGTH_EXCEEDED),
)


def classify_message(text: str) -> FailureCode:
    return classify(text, _MARKERS)


class ClaudeCodeBackend(CliAgentBackend):
    name = "claude_code"
    command, option, env, install_hint = "claude", "claude_bin", CLAUDE_ENV, INSTALL_HINT

    def argv(self, request: BackendRequest) -> list[str]:
        """No shell: each value is its own argv item, joined to its option as ``--opt=VALUE`` so
        a value that starts with ``-`` (a system prompt that begins with a model's or a person's
        text, a session id from an earlier reply) is never read as another option."""
        argv = [self.executable(), "-p", "--output-format", "json"]
        if request.model:
            argv.append(f"--model={strip_provider(request.model, 'anthropic')}")
        system = "\n\n".join(p for p in (request.system, output_instructions(request)) if p)
        if system and not resumed(request):  # the resumed session has it already
            argv.append(f"--append-system-prompt={system}")
        # the run's permission policy (iterion.permissions.claude_code_flags); the node's tools,
        # as Claude Code names them, join its allowed list
        try:
            allowed = claude_tool_names(request.tools)
        except ValueError as exc:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE, f"node {request.node_id} (claude_code backend): "
                               f"{exc}") from None
        for flag in request.permission_flags:
            if flag.startswith("--allowedTools="):
                allowed += [t for t in flag.split("=", 1)[1].split(",") if t and t not in allowed]
            else:
                argv.append(flag)
        if allowed:
            argv.append("--allowedTools=" + ",".join(allowed))
        if request.session_id:
            argv.append(f"--resume={request.session_id}")
        return self.root_bypass(argv, request)

    def root_bypass(self, argv: list[str], request: BackendRequest) -> list[str]:
        """As root, the CLI refuses ``bypassPermissions`` unless told it runs in a sandbox
        (``IS_SANDBOX=1``). That is true only inside iterion's own sandbox; anywhere else the
        refusal is said here, deterministic, instead of the CLI's error being retried. The
        variable is set through ``env`` in the argv so the shared process launcher is unchanged."""
        if "--permission-mode=bypassPermissions" not in argv or os.geteuid() != 0:
            return argv
        if not iterion_sandbox_active(request):
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"node {request.node_id}: claude refuses --permission-mode=bypassPermissions as "
                               "root; run iterion as a non-root user, or run the node in iterion's bubblewrap "
                               "sandbox (sandbox: auto), where IS_SANDBOX=1 is set for it")
        return [shutil.which("env") or "/usr/bin/env", "IS_SANDBOX=1", *argv]

    def prompt(self, request: BackendRequest) -> str:
        if resumed(request):  # the session holds the task and the question: only the answer goes in
            return answer_text(request.prior_answer)
        return "\n\n".join(p for p in (request.user, prior_exchange(request)) if p)

    def complete(self, request: BackendRequest) -> BackendResponse:
        out, err, status = self.run_cli(self.argv(request), self.prompt(request), request)
        data = self._parse(out)
        if data is None:
            detail = (err or out).strip()[-500:] or f"exit status {status}"
            raise BackendError(classify_message(detail), f"claude failed on node {request.node_id}: {detail}")
        usage = data.get("usage") or {}
        tin = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                     "cache_read_input_tokens"))
        tout = int(usage.get("output_tokens") or 0)
        cost = float(data.get("total_cost_usd") or data.get("cost_usd") or 0.0)
        text = str(data.get("result") or "")
        if data.get("is_error") or status != 0 or data.get("subtype", "success") != "success":
            detail = text or (err or "").strip()[-500:] or str(data.get("subtype"))
            raise BackendError(classify_message(detail),
                               f"claude failed on node {request.node_id}: {detail}").with_usage(tin, tout, cost)
        try:
            output, ask, selected = finish_structured(request, text)
        except BackendError as exc:
            raise exc.with_usage(tin, tout, cost) from None
        return BackendResponse(output=output, text=text, tokens_in=tin, tokens_out=tout, cost_usd=cost,
                               session_id=data.get("session_id"), ask_user=ask, selected=selected,
                               raw={"num_turns": data.get("num_turns"), "duration_ms": data.get("duration_ms")})

    @staticmethod
    def _parse(out: str) -> dict[str, Any] | None:
        """The CLI's result object (the last JSON object line, tolerating log lines before it)."""
        text = out.strip()
        for candidate in [text, *reversed(text.splitlines())]:
            try:
                value = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
            if isinstance(value, list):  # stream-style output: the final "result" message
                results = [v for v in value if isinstance(v, dict) and v.get("type") == "result"]
                if results:
                    return results[-1]
        return None
