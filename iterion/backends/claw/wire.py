"""The two wire formats the claw agent speaks: OpenAI-compatible chat completions with tool
calling, and the Anthropic messages API with tool_use blocks. Each turns the provider-neutral
conversation (``conversation.py``) into a request body and a response into a ``Turn``.

Transport and HTTP errors go through ``iterion.backends.httperrors.post_json`` (the one mapping to
the failure-code table both backends share).

Tool names on the wire must match ``^[a-zA-Z0-9_-]{1,64}$`` for both providers, so
``mcp.github.get_issue`` travels as ``mcp__github__get_issue`` and is mapped back.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import httpx

from iterion.backends.base import BackendError
from iterion.backends.httperrors import post_json
from iterion.backends.jsonout import Fallback, response_format, token_limit_field
from iterion.backends.openai import DEFAULT_BASE_URL as OPENAI_DEFAULT_URL
from iterion.backends.openai import cached_tokens
from iterion.backends.pricing import cost_usd
from iterion.backends.sse import (
    AnthropicStream,
    OpenAIStream,
    Progress,
    fold_stream,
    json_body,
    post_stream,
    streaming_enabled,
)
from iterion.failure_codes import FailureCode

ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096  # the messages API requires max_tokens


def wire_name(name: str) -> str:
    return name.replace(".", "__")


@dataclass
class ToolSpec:
    name: str                 # the iterion name (mcp.files.echo)
    description: str
    parameters: dict[str, Any]


@dataclass
class ToolCall:
    id: str
    name: str                 # the iterion name (mapped back from the wire name)
    arguments: dict[str, Any]
    bad_arguments: str | None = None  # the raw text when the arguments were not a JSON object


@dataclass(frozen=True)
class Output:
    """The JSON answer a turn asks for: the schema's name and its JSON Schema."""

    name: str
    schema: dict[str, Any]


# the forced tool that carries the output schema on the Anthropic wire (its equivalent of
# response_format: the tool's input is the answer)
FINAL_ANSWER_TOOL = "final_answer"


@dataclass
class Turn:
    text: str
    calls: list[ToolCall] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    truncated: bool = False   # stopped at max_tokens
    raw: dict[str, Any] = field(default_factory=dict)


class Wire:
    provider = ""
    base_url = ""
    credential = ""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._client: httpx.Client | None = None

    def headers(self) -> dict[str, str]:
        return {}

    def http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(base_url=self.base_url.rstrip("/") + "/", headers=self.headers(),
                                        timeout=self.timeout_s)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def availability(self) -> tuple[bool, str]:
        raise NotImplementedError

    def turn(self, *, model: str, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec],
             max_tokens: int | None, reasoning_effort: str | None, output: Output | None = None,
             final: bool = False, force_tool: str | None = None, progress: Progress | None = None) -> Turn:
        """One model turn. ``output``: the answer must be JSON matching it (asked for in the
        request, not only in the prompt); ``final``: the model may no longer call tools (the
        final-answer turn, see loop.py); ``force_tool``: the model must call this tool (the
        provider's ``tool_choice``); ``progress``: where the streamed answer's chunks are counted
        (``iterion.backends.sse``)."""
        raise NotImplementedError

    def _exchange(self, path: str, body: dict[str, Any], fold: OpenAIStream | AnthropicStream,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The answer to ``body``, streamed (``iterion.backends.sse``) unless $ITERION_STREAM=0;
        an answer cut by a failure is recorded (``model_partial``) before the failure is raised."""
        if not streaming_enabled():
            return self._post(path, body)
        return fold_stream(fold, lambda: post_stream(
            self.http(), path, {**body, "stream": True, **(extra or {})}, timeout=self.timeout_s, where=self.base_url,
            credential=self.credential, on_data=fold), self.base_url)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = post_json(self.http(), path, body, timeout=self.timeout_s, where=self.base_url,
                         credential=self.credential)
        return json_body(resp, self.base_url)


def _names(tools: list[ToolSpec]) -> dict[str, str]:
    return {wire_name(t.name): t.name for t in tools}


def _parse_args(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    if raw is None or raw == "":
        return {}, None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}, str(raw)[:500]
    return (value, None) if isinstance(value, dict) else ({}, str(raw)[:500])


class OpenAIWire(Wire):
    provider = "openai"
    credential = "$OPENAI_API_KEY"

    def __init__(self, timeout_s: float, base_url: str | None = None, api_key: str | None = None,
                 json_mode: str = "auto") -> None:
        super().__init__(timeout_s)
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.json = Fallback(json_mode)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def availability(self) -> tuple[bool, str]:
        if self.base_url.rstrip("/") == OPENAI_DEFAULT_URL and not self.api_key:
            return False, "no $OPENAI_API_KEY (or $OPENAI_BASE_URL for a compatible endpoint)"
        return True, f"{self.base_url} ({'with' if self.api_key else 'without'} an API key)"

    @staticmethod
    def messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for m in messages:
            if m["role"] == "assistant":
                # a string beside tool_calls, never null: llama.cpp's server refuses null (HTTP 500)
                msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or ""}
                if m.get("tool_calls"):
                    msg["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                        "name": wire_name(c["name"]), "arguments": json.dumps(c.get("arguments") or {})}}
                        for c in m["tool_calls"]]
                out.append(msg)
            elif m["role"] == "tool":
                out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m.get("content") or ""})
            else:
                out.append({"role": "user", "content": m.get("content") or ""})
        return out

    def body(self, *, model: str, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec],
             max_tokens: int | None, reasoning_effort: str | None, output: Output | None = None,
             final: bool = False, force_tool: str | None = None) -> dict[str, Any]:
        """The request body. The final-answer turn offers no tools (never ``tools: []``, which
        llama.cpp's server refuses) and asks for the output schema as ``response_format``."""
        body: dict[str, Any] = {"model": model, "messages": self.messages(system, messages)}
        if tools and not final:
            body["tools"] = [{"type": "function", "function": {"name": wire_name(t.name), "description": t.description,
                                                               "parameters": t.parameters}} for t in tools]
            if force_tool and any(t.name == force_tool for t in tools):
                body["tool_choice"] = {"type": "function", "function": {"name": wire_name(force_tool)}}
        if max_tokens:
            body[token_limit_field(self.base_url, model)] = max_tokens
        if reasoning_effort:
            body["reasoning_effort"] = reasoning_effort
        if output is not None:
            body["response_format"] = response_format(self.json.current(), output.name, output.schema)
        return body

    def turn(self, *, model: str, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec],
             max_tokens: int | None, reasoning_effort: str | None, output: Output | None = None,
             final: bool = False, force_tool: str | None = None, progress: Progress | None = None) -> Turn:
        if self.base_url.rstrip("/") == OPENAI_DEFAULT_URL and not self.api_key:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               "the claw backend (openai provider) needs $OPENAI_API_KEY (or $OPENAI_BASE_URL for "
                               "a compatible endpoint that needs no key)")
        while True:
            body = self.body(model=model, system=system, messages=messages, tools=tools, max_tokens=max_tokens,
                             reasoning_effort=reasoning_effort, output=output, final=final, force_tool=force_tool)
            try:
                # usage arrives in a last chunk only when asked for
                data = self._exchange("chat/completions", body, OpenAIStream(progress or Progress(None)),
                                      {"stream_options": {"include_usage": True}})
                break
            except BackendError as exc:
                if output is not None and self.json.should_retry(exc):
                    continue  # the endpoint refused json_schema: ask again in llama.cpp's form
                raise
        try:
            choice = data["choices"][0]
            msg = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(FailureCode.EXECUTION_FAILED,
                               f"{self.base_url} answered with no chat completion: {json.dumps(data)[:200]!r}") from None
        names = _names(tools)
        calls: list[ToolCall] = []
        for c in msg.get("tool_calls") or []:
            fn = c.get("function") or {}
            args, bad = _parse_args(fn.get("arguments"))
            wname = str(fn.get("name") or "")
            calls.append(ToolCall(str(c.get("id") or f"call_{len(calls)}"), names.get(wname, wname), args, bad))
        usage = data.get("usage") or {}
        tin, tout = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cost = usage.get("cost")
        spent = float(cost) if isinstance(cost, (int, float)) else cost_usd(model, tin, tout,
                                                                             cache_read=cached_tokens(usage))
        return Turn(str(msg.get("content") or ""), calls, tin, tout, spent,
                    truncated=choice.get("finish_reason") == "length",
                    raw={"id": data.get("id"), "finish_reason": choice.get("finish_reason")})


class AnthropicWire(Wire):
    provider = "anthropic"
    credential = "$ANTHROPIC_API_KEY"

    def __init__(self, timeout_s: float, base_url: str | None = None, api_key: str | None = None) -> None:
        super().__init__(timeout_s)
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT_URL
        self.api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")

    def headers(self) -> dict[str, str]:
        h = {"anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            h["x-api-key"] = self.api_key
        return h

    def availability(self) -> tuple[bool, str]:
        if self.base_url.rstrip("/") == ANTHROPIC_DEFAULT_URL and not self.api_key:
            return False, "no $ANTHROPIC_API_KEY (or $ANTHROPIC_BASE_URL for a compatible endpoint)"
        return True, f"{self.base_url} ({'with' if self.api_key else 'without'} an API key)"

    @staticmethod
    def messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Neutral -> Anthropic: tool results become tool_result blocks of a user message, and
        consecutive user contents merge (the API wants alternating roles)."""
        out: list[dict[str, Any]] = []

        def add(role: str, blocks: list[dict[str, Any]]) -> None:
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})

        for m in messages:
            if m["role"] == "assistant":
                blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
                blocks += [{"type": "tool_use", "id": c["id"], "name": wire_name(c["name"]),
                            "input": c.get("arguments") or {}} for c in m.get("tool_calls") or []]
                add("assistant", blocks or [{"type": "text", "text": ""}])
            elif m["role"] == "tool":
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                                         "content": m.get("content") or ""}
                if m.get("is_error"):
                    block["is_error"] = True
                add("user", [block])
            else:
                add("user", [{"type": "text", "text": m.get("content") or ""}])
        return out

    def body(self, *, model: str, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec],
             max_tokens: int | None, reasoning_effort: str | None, output: Output | None = None,
             final: bool = False, force_tool: str | None = None) -> dict[str, Any]:
        """The request body. A JSON answer is asked for as a forced call of the ``final_answer``
        tool whose input schema is the output schema (every Claude model with tool use honours
        it); the other tools stay declared (the history's tool_use blocks need them) but cannot
        be chosen then."""
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
                                "messages": self.messages(messages)}
        if system:
            body["system"] = system
        declared = [{"name": wire_name(t.name), "description": t.description, "input_schema": t.parameters}
                    for t in tools]
        if output is not None and (final or not tools):
            declared.append({"name": FINAL_ANSWER_TOOL, "input_schema": output.schema,
                             "description": f"Give the final answer ({output.name}) as this tool's input."})
            body["tool_choice"] = {"type": "tool", "name": FINAL_ANSWER_TOOL}
        elif force_tool and any(t.name == force_tool for t in tools):
            body["tool_choice"] = {"type": "tool", "name": wire_name(force_tool)}
        if declared:
            body["tools"] = declared
        return body

    def turn(self, *, model: str, system: str, messages: list[dict[str, Any]], tools: list[ToolSpec],
             max_tokens: int | None, reasoning_effort: str | None, output: Output | None = None,
             final: bool = False, force_tool: str | None = None, progress: Progress | None = None) -> Turn:
        if self.base_url.rstrip("/") == ANTHROPIC_DEFAULT_URL and not self.api_key:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               "the claw backend (anthropic provider) needs $ANTHROPIC_API_KEY (or "
                               "$ANTHROPIC_BASE_URL for a compatible endpoint that needs no key)")
        body = self.body(model=model, system=system, messages=messages, tools=tools, max_tokens=max_tokens,
                         reasoning_effort=reasoning_effort, output=output, final=final, force_tool=force_tool)
        data = self._exchange("v1/messages", body, AnthropicStream(progress or Progress(None)))
        content = data.get("content")
        if not isinstance(content, list):
            raise BackendError(FailureCode.EXECUTION_FAILED,
                               f"{self.base_url} answered with no message content: {json.dumps(data)[:200]!r}")
        names = _names(tools)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                texts.append(str(b.get("text") or ""))
            elif b.get("type") == "tool_use" and b.get("name") == FINAL_ANSWER_TOOL and output is not None:
                texts = [json.dumps(b.get("input") if isinstance(b.get("input"), dict) else {})]
                calls = []
                break  # the answer; any text beside it was commentary
            elif b.get("type") == "tool_use":
                args, bad = _parse_args(b.get("input"))
                wname = str(b.get("name") or "")
                calls.append(ToolCall(str(b.get("id") or f"toolu_{len(calls)}"), names.get(wname, wname), args, bad))
        usage = data.get("usage") or {}
        read, written = int(usage.get("cache_read_input_tokens") or 0), int(usage.get("cache_creation_input_tokens") or 0)
        tin = int(usage.get("input_tokens") or 0) + read + written
        tout = int(usage.get("output_tokens") or 0)
        return Turn("".join(texts), calls, tin, tout,
                    cost_usd(model, tin, tout, cache_read=read, cache_write=written),
                    truncated=data.get("stop_reason") == "max_tokens",
                    raw={"id": data.get("id"), "stop_reason": data.get("stop_reason")})


def resolve_provider(model: str | None, provider: str | None) -> tuple[str, str]:
    """(provider, model name sent on the wire) from ``model: "provider/model"`` and ``provider:``.

    A known provider prefix (``openai/``, ``anthropic/``) is stripped; any other slash is part of
    the model's own name (``meta-llama/llama-3`` on OpenRouter). ``provider: auto`` or none: the
    prefix, else ``anthropic`` for a ``claude`` model, else ``openai`` (any compatible endpoint)."""
    name = (model or "").strip()
    prefix, _, rest = name.partition("/")
    chosen = (provider or "").strip().lower()
    if rest and prefix.lower() in ("openai", "anthropic"):
        if not chosen or chosen == "auto":
            chosen = prefix.lower()
        name = rest
    if not chosen or chosen == "auto":
        chosen = "anthropic" if name.lower().startswith("claude") else "openai"
    if chosen != "anthropic":
        chosen = "openai"  # every other provider (zai, openrouter, vllm, ollama) speaks chat completions
    return chosen, name
