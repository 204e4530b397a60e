"""The ``codex`` backend: delegates a node to the ``codex`` CLI (OpenAI Codex CLI).

Runs ``codex exec --json --skip-git-repo-check -`` in the run's workspace (its cwd) with the
prompt on stdin (``-``), plus ``--model=`` when the node names one (an ``openai/`` prefix
stripped), a custom provider on the Responses API when ``$OPENAI_BASE_URL`` is set
(``provider_config``) and the run's sandbox flag (``iterion.permissions.codex_flags``). A resumed
thread is sent only the user's answer. An ask_user resume continues the CLI's thread with
``codex exec [OPTIONS] resume -- <thread_id> -``: the options come before ``resume`` (the form the
CLI documents) and ``--`` ends them, so a session id that starts with ``-`` stays a value.

The CLI has no system-prompt flag, so the node's system prompt and the output instructions
(``schema.output_instructions``) head the stdin prompt, before the user prompt and the earlier
question and answer (a fallback for a thread the CLI lost, as for claude_code).

stdout is JSONL, one event per line: ``thread.started`` gives the session id, the last completed
``agent_message`` item the text, each ``turn.completed`` its ``usage`` (summed); ``turn.failed``
and ``error`` carry the failure's message. Unknown event types and non-JSON log lines are
skipped. The CLI reports no cost, so cost is 0 (tokens still count toward the budget).

Not passed: the node's ``tools`` (Codex has its own tool set, no allow list on the command line),
``reasoning_effort`` and ``--output-schema`` (the JSON shape is asked for in the prompt and
checked by ``finish_structured``, which also lets the agent answer with an ask_user question).

Binary: ``options["codex_bin"]`` / ``$ITERION_CODEX_BIN`` / ``codex`` on PATH.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from iterion.backends.base import BackendError, BackendRequest, BackendResponse
from iterion.backends.cliagent import CliAgentBackend, answer_text, classify, resumed, strip_provider
from iterion.backends.schema import finish_structured, output_instructions, prior_exchange
from iterion.failure_codes import FailureCode

CODEX_ENV = "ITERION_CODEX_BIN"
PROVIDER_ID = "iterion"  # the model provider iterion declares for $OPENAI_BASE_URL
INSTALL_HINT = ("install it with `npm install -g @openai/codex` (then run `codex login` once), "
                f"point ${CODEX_ENV} at it, or choose another backend (claw, claude_code, openai, script)")

# OpenAI's and the CLI's wording; first match wins, so a usage limit is not taken for a rate limit
_MARKERS: tuple[tuple[tuple[str, ...], FailureCode], ...] = (
    (("usage limit", "insufficient_quota", "exceeded your current quota", "quota exceeded"),
     FailureCode.USAGE_LIMIT_BLOCKED),
    (("rate limit", "rate_limit", "429", "too many requests"), FailureCode.RATE_LIMITED),
    (("context_length_exceeded", "context length", "context window", "maximum context", "too many tokens"),
     FailureCode.CONTEXT_LENGTH_EXCEEDED),
    (("invalid api key", "incorrect api key", "invalid_api_key", "authentication", "unauthorized", "401", "403",
      "not logged in", "codex login", "token expired", "refresh token"), FailureCode.AUTH_FAILED),
)


def classify_message(text: str) -> FailureCode:
    return classify(text, _MARKERS)


@dataclass
class Transcript:
    """What one ``codex exec --json`` run said on stdout."""

    events: int = 0  # JSON event lines seen (0: the CLI printed no protocol at all)
    thread_id: str | None = None
    text: str | None = None  # the last completed agent_message
    tokens_in: int = 0
    tokens_out: int = 0
    completed: bool = False  # a turn.completed was seen
    failures: list[str] = field(default_factory=list)  # turn.failed messages (fatal)
    errors: list[str] = field(default_factory=list)  # error events (fatal only without turn.completed)


def parse_events(out: str) -> Transcript:
    t = Transcript()
    for line in out.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a log line among the events
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            continue
        t.events += 1
        kind = event["type"]
        if kind == "thread.started" and event.get("thread_id"):
            t.thread_id = str(event["thread_id"])
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                t.text = item["text"]
        elif kind == "turn.completed":
            t.completed = True
            usage = event.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            # OpenAI counts cached input inside input_tokens (cached_input_tokens is a part of
            # it, unlike Anthropic's separate cache counts): adding it would count it twice
            t.tokens_in += _int(usage.get("input_tokens"))
            t.tokens_out += _int(usage.get("output_tokens"))
        elif kind == "turn.failed":
            t.failures.append(_message(event.get("error")) or "turn failed")
        elif kind == "error":
            t.errors.append(_message(event) or "error")
    return t


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _message(obj: Any) -> str:
    return str(obj.get("message") or "") if isinstance(obj, dict) else ""


class CodexBackend(CliAgentBackend):
    name = "codex"
    command, option, env, install_hint = "codex", "codex_bin", CODEX_ENV, INSTALL_HINT

    def argv(self, request: BackendRequest) -> list[str]:
        """No shell: each value is its own argv item, joined to its option as ``--opt=VALUE`` so
        a value that starts with ``-`` is never read as another option; the prompt is ``-``
        (stdin), never a value on the command line."""
        argv = [self.executable(), "exec", "--json", "--skip-git-repo-check"]
        if request.model:
            argv.append(f"--model={strip_provider(request.model, 'openai')}")
        argv += self.provider_config()
        # the run's permission policy and the node's readonly (iterion.permissions.codex_flags)
        argv += request.permission_flags
        if request.session_id:
            argv += ["resume", "--", request.session_id, "-"]
        else:
            argv.append("-")
        return argv

    def provider_config(self) -> list[str]:
        """With ``$OPENAI_BASE_URL`` (or ``options["base_url"]``): a custom model provider for
        that endpoint. The CLI speaks only the Responses API (0.171 refuses ``wire_api = "chat"``),
        so the endpoint must serve ``/responses`` (vLLM, Ollama and LM Studio do; llama.cpp's
        ``llama_cpp.server`` does not)."""
        base = str(self.options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "")
        if not base:
            return []
        fields = [f"name = {json.dumps('iterion')}", f"base_url = {json.dumps(base)}",
                  f"wire_api = {json.dumps('responses')}"]
        if os.environ.get("OPENAI_API_KEY"):
            fields.append(f"env_key = {json.dumps('OPENAI_API_KEY')}")
        return [f"--config=model_providers.{PROVIDER_ID}={{ {', '.join(fields)} }}",
                f"--config=model_provider={json.dumps(PROVIDER_ID)}"]

    def prompt(self, request: BackendRequest) -> str:
        if resumed(request):  # the thread holds the task and the question: only the answer goes in
            return answer_text(request.prior_answer)
        return "\n\n".join(p for p in (request.system, output_instructions(request), request.user,
                                       prior_exchange(request)) if p)

    def complete(self, request: BackendRequest) -> BackendResponse:
        out, err, status = self.run_cli(self.argv(request), self.prompt(request), request)
        t = parse_events(out)
        where = f"codex failed on node {request.node_id}"
        if t.events == 0:
            detail = (err or out).strip()[-500:] or f"exit status {status}"
            raise BackendError(classify_message(detail), f"{where}: no JSON events on stdout ({detail})")
        # an error event followed by turn.completed was a retried hiccup (e.g. a reconnect)
        fatal = t.failures or ([] if t.completed else t.errors)
        if fatal or status != 0 or not t.completed:
            detail = "; ".join(fatal) or (err or "").strip()[-500:] or (
                f"exit status {status}" if status != 0 else "the turn never completed")
            raise BackendError(classify_message(detail), f"{where}: {detail}").with_usage(
                t.tokens_in, t.tokens_out, 0.0)
        text = t.text or ""
        try:
            output, ask, selected = finish_structured(request, text)
        except BackendError as exc:
            raise exc.with_usage(t.tokens_in, t.tokens_out, 0.0) from None
        return BackendResponse(output=output, text=text, tokens_in=t.tokens_in, tokens_out=t.tokens_out,
                               cost_usd=0.0, session_id=t.thread_id, ask_user=ask, selected=selected,
                               raw={"events": t.events})
