"""Streamed model answers (server-sent events) for the ``openai`` backend and the claw agent.

Why streamed: a CPU model takes minutes for a long answer; streamed, the live progress shows the
tokens arriving (``model_progress`` events, throttled), the call's time limit applies to the
silence between two chunks (httpx's read timeout), not to the whole generation, and an answer cut
by a crash is kept (``model_partial``) before the failure is raised.

Both formats are folded back into their non-streamed response shape (``OpenAIStream.result``,
``AnthropicStream.result``), so one parser reads either. A server that ignores ``stream`` and
answers with plain JSON is read as before. ``$ITERION_STREAM=0`` turns streaming off (a proxy
that buffers SSE, say).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iterion.backends.base import BackendError
from iterion.backends.httperrors import classify_http
from iterion.failure_codes import FailureCode

if TYPE_CHECKING:
    import httpx

STREAM_ENV = "ITERION_STREAM"
PROGRESS_EVERY_S = 1.0  # at most one model_progress event a second: the timeline stays small
PARTIAL_CAP = 4000  # characters of a cut answer kept on the timeline

Emit = Callable[[str, dict[str, Any]], None]


def streaming_enabled() -> bool:
    return os.environ.get(STREAM_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class Progress:
    """Counts the chunks of one answer (about a token each) and reports them, throttled."""

    def __init__(self, emit: Emit | None, check: Callable[[], None] | None = None) -> None:
        self.emit = emit
        self.check = check
        self.t0 = time.monotonic()
        self.first: float | None = None
        self.tokens = 0
        self.last = 0.0

    def tick(self, tokens: int = 1) -> None:
        if self.check is not None:
            self.check()  # a cancel stops the generation between two chunks
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.tokens += tokens
        if self.emit is not None and now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            self.emit("model_progress", self.payload(now))

    def payload(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        span = now - (self.first or now)
        return {"tokens_out": self.tokens, "seconds": round(now - self.t0, 2),
                "tokens_per_s": round(self.tokens / span, 1) if span > 0 else None}

    def done(self) -> None:
        if self.emit is not None and self.tokens:
            self.emit("model_progress", {**self.payload(), "done": True})

    def lost(self, text: str, exc: BackendError) -> None:
        """The answer so far, recorded before the failure that cut it is raised."""
        if self.emit is not None and (text or self.tokens):
            self.emit("model_partial", {"text": text[:PARTIAL_CAP], "chars": len(text), "tokens_out": self.tokens,
                                        "code": exc.code.value, "error": exc.message[:300]})


def json_body(resp: httpx.Response, where: str) -> dict[str, Any]:
    """The answer's body as one JSON object, else EXECUTION_FAILED quoting its start."""
    try:
        data = resp.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise BackendError(FailureCode.EXECUTION_FAILED,
                           f"{where} answered with something that is not JSON: {resp.text[:200]!r}")
    return data


def post_stream(client: httpx.Client, path: str, body: dict[str, Any], *, timeout: float, where: str,
                credential: str, on_data: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
    """POST ``body`` and feed each SSE ``data:`` object to ``on_data``; None when streamed, the
    parsed JSON when the server answered without streaming. Errors as ``httperrors.post_json``;
    ``timeout`` is the longest silence allowed (before the answer starts, or between chunks)."""
    import httpx

    try:
        with client.stream("POST", path, json=body, timeout=httpx.Timeout(timeout)) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise classify_http(resp, credential)
            if "text/event-stream" not in resp.headers.get("content-type", ""):
                resp.read()
                return json_body(resp, where)
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue  # event:, id:, comments and the blank separators
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    obj = json.loads(payload)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    on_data(obj)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise BackendError(FailureCode.NETWORK_TRANSIENT, f"cannot reach {where}: {exc}") from None
    except httpx.TimeoutException as exc:
        raise BackendError(FailureCode.TIMEOUT, f"{where} was silent for {timeout:g}s (the limit between two "
                                                f"chunks of an answer): {type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        # the connection broke mid-answer (the server crashed or was killed): a retry may pass
        raise BackendError(FailureCode.EXECUTION_FAILED,
                           f"{where} broke off the answer: {type(exc).__name__}: {exc}") from None
    return None


def fold_stream(fold: OpenAIStream | AnthropicStream, send: Callable[[], dict[str, Any] | None],
                where: str) -> dict[str, Any]:
    """Run ``send`` (a ``post_stream`` call feeding ``fold``) and return the whole answer; an
    answer cut by a failure, or one whose stream ended before it said it was finished, is
    recorded (``model_partial``) and fails EXECUTION_FAILED (a retry may pass)."""
    try:
        got = send()
        if got is None and not fold.finished():
            raise BackendError(FailureCode.EXECUTION_FAILED, f"{where} ended the answer's stream before it was "
                               "finished (no finish reason)")
    except BackendError as exc:
        fold.progress.lost(fold.partial(), exc)
        raise
    if got is not None:  # the server did not stream
        return got
    fold.progress.done()
    return fold.result()


class OpenAIStream:
    """Chat-completion chunks folded into one chat completion."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.id: str | None = None
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None

    def __call__(self, chunk: dict[str, Any]) -> None:
        if "error" in chunk:  # some servers report a failure inside the stream
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else str(err)
            raise BackendError(FailureCode.EXECUTION_FAILED, f"the provider failed mid-answer: {msg}")
        self.id = self.id or chunk.get("id")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            grew = 0
            if isinstance(delta.get("content"), str) and delta["content"]:
                self.text.append(delta["content"])
                grew = 1
            for tc in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(int(tc.get("index") or 0), {"id": None, "name": "", "arguments": ""})
                slot["id"] = tc.get("id") or slot["id"]
                fn = tc.get("function") or {}
                name = fn.get("name") or ""
                # OpenAI sends the name once; llama.cpp's server repeats it whole in every chunk
                if name and name != slot["name"]:
                    slot["name"] += name
                slot["arguments"] += fn.get("arguments") or ""
                grew = 1
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
            if grew:
                self.progress.tick()

    def finished(self) -> bool:
        return self.finish is not None

    def partial(self) -> str:
        calls = "".join(f"\n[call {c['name']}({c['arguments']})]" for c in self.calls.values())
        return "".join(self.text) + calls

    def result(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text)}
        if self.calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for _i, c in sorted(self.calls.items())]
        usage = self.usage or {"prompt_tokens": 0, "completion_tokens": self.progress.tokens}
        return {"id": self.id, "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
                "usage": usage}


class AnthropicStream:
    """Messages-API stream events folded into one message."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.message: dict[str, Any] = {"content": [], "usage": {}}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            msg = event.get("message") or {}
            self.message["id"] = msg.get("id")
            self.message["usage"].update(msg.get("usage") or {})
        elif kind == "content_block_start":
            i = int(event.get("index") or 0)
            block = dict(event.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["input"] = {}
                self.json_parts[i] = []
            self.blocks[i] = block
        elif kind == "content_block_delta":
            i = int(event.get("index") or 0)
            delta = event.get("delta") or {}
            block = self.blocks.setdefault(i, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                self.json_parts.setdefault(i, []).append(str(delta.get("partial_json") or ""))
            self.progress.tick()
        elif kind == "content_block_stop":
            i = int(event.get("index") or 0)
            if i in self.json_parts:
                raw = "".join(self.json_parts.pop(i))
                try:
                    self.blocks[i]["input"] = json.loads(raw) if raw else {}
                except ValueError:
                    self.blocks[i]["input"] = raw  # the loop reports arguments that are not an object
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.message["stop_reason"] = delta["stop_reason"]
            self.message["usage"].update(event.get("usage") or {})
        elif kind == "error":
            err = event.get("error") or {}
            code = FailureCode.RATE_LIMITED if err.get("type") == "rate_limit_error" else FailureCode.EXECUTION_FAILED
            raise BackendError(code, f"the provider failed mid-answer: {err.get('type')}: {err.get('message')}")

    def finished(self) -> bool:
        return "stop_reason" in self.message

    def partial(self) -> str:
        return "".join(str(b.get("text") or "") for _i, b in sorted(self.blocks.items()))

    def result(self) -> dict[str, Any]:
        return {**self.message, "content": [b for _i, b in sorted(self.blocks.items())]}
