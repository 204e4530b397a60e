"""A scripted LLM server on 127.0.0.1 (real HTTP, random port) speaking both wire formats.

It answers a given sequence of steps, in order, whatever the request, and records every request
(path, headers, JSON body). ``POST .../chat/completions`` gets an OpenAI chat completion,
``POST .../messages`` an Anthropic message: the same script drives both formats.

A step is one of:

* ``{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}], "text": "..."}``
* ``{"text": "final answer"}``
* ``{"status": 429, "error": "slow down"}`` (an HTTP error in the provider's error shape)

plus optional ``"usage": {"in": N, "out": M}`` and ``"repeat": true`` (answer it forever).

A request with ``"stream": true`` is answered with server-sent events in that format's chunks
(``ScriptedLLM(stream=False)`` answers it with plain JSON, as a server that ignores ``stream``);
``"cut_after": K`` sends K chunks, then drops the connection mid-answer (a crash), and
``"chunk_delay_s"`` paces the chunks.
Tool names are iterion names (``mcp.files.echo``); the server sends their wire form.

As a program (the claw demo, no API key needed)::

    python -m tests.claw.scripted_server SCRIPT.json -- COMMAND ARGS...

starts the server, runs COMMAND with ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` pointing at it,
and exits with COMMAND's status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class ScriptedLLM:
    def __init__(self, steps: list[dict[str, Any]], *, stream: bool = True) -> None:
        self.stream = stream
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self._i = 0
        self._ids = 0
        self.last_step: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> ScriptedLLM:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_a: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                status, payload = owner.answer(self.path, dict(self.headers), body)
                step = owner.last_step
                if status == 200 and body.get("stream") and owner.stream:
                    self.send_sse(sse_events(payload, self.path.rstrip("/").endswith("/messages")), step)
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def send_sse(self, events: list[str], step: dict[str, Any]) -> None:
                # chunked (HTTP/1.1), so a connection dropped mid-answer is an incomplete body
                self.protocol_version = "HTTP/1.1"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.send_header("connection", "close")  # never a pooled connection the server closed
                self.end_headers()
                cut = step.get("cut_after")
                for i, ev in enumerate(events):
                    if cut is not None and i >= int(cut):
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)  # the crash: no last chunk, no [DONE]
                        return
                    data = ev.encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(float(step.get("chunk_delay_s") or 0))
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() waits for the loop's next poll: at the default 0.5 s, each test's teardown slept
        # ~0.4 s doing nothing (fake_openai.py polls at 0.02 s too)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedLLM:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def add(self, *steps: dict[str, Any]) -> None:
        with self._lock:
            self.steps.extend(steps)

    # -- answering --------------------------------------------------------------------------------
    def next_step(self) -> dict[str, Any]:
        if self._i >= len(self.steps):
            return {"status": 500, "error": f"scripted server: script exhausted after {len(self.steps)} steps"}
        step = self.steps[self._i]
        if not step.get("repeat"):
            self._i += 1
        self.last_step = step
        return step

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append({"path": path, "headers": {k.lower(): v for k, v in headers.items()}, "body": body})
            step = self.next_step()
            anthropic = path.rstrip("/").endswith("/messages")
            usage = step.get("usage") or {"in": 10, "out": 5}
            if "status" in step:
                kind = step.get("error_type", "api_error")
                return int(step["status"]), {"type": "error", "error": {"type": kind, "message": step.get("error", "")}}
            calls = []
            for c in step.get("tool_calls") or []:
                self._ids += 1
                calls.append((f"{'toolu' if anthropic else 'call'}_{self._ids}", c["name"].replace(".", "__"),
                               c.get("arguments") or {}))
            text = step.get("text") or ""
            if anthropic:
                content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
                content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
                return 200, {"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
                             "model": body.get("model"), "content": content,
                             "stop_reason": step.get("stop_reason") or ("tool_use" if calls else "end_turn"),
                             "usage": {"input_tokens": usage["in"], "output_tokens": usage["out"]}}
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                                         for i, n, a in calls]
            return 200, {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "model": body.get("model"),
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": step.get("finish_reason") or ("tool_calls" if calls else "stop")}],
                         "usage": {"prompt_tokens": usage["in"], "completion_tokens": usage["out"],
                                   "total_tokens": usage["in"] + usage["out"]}}


def sse_events(payload: dict[str, Any], anthropic: bool) -> list[str]:
    """A complete answer as the server-sent events that stream it (text in 4-character pieces)."""
    def ev(obj: dict[str, Any], name: str | None = None) -> str:
        return (f"event: {name}\n" if name else "") + f"data: {json.dumps(obj)}\n\n"

    if anthropic:
        out = [ev({"type": "message_start", "message": {"id": payload["id"], "type": "message", "role": "assistant",
                                                        "content": [], "usage": {"input_tokens": payload["usage"]["input_tokens"]}}},
                  "message_start")]
        for i, block in enumerate(payload["content"]):
            if block["type"] == "text":
                out.append(ev({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}))
                out += [ev({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"][j:j + 4]}})
                        for j in range(0, len(block["text"]), 4)]
            else:
                out.append(ev({"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
                out.append(ev({"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
            out.append(ev({"type": "content_block_stop", "index": i}))
        out.append(ev({"type": "message_delta", "delta": {"stop_reason": payload["stop_reason"]},
                       "usage": {"output_tokens": payload["usage"]["output_tokens"]}}))
        out.append(ev({"type": "message_stop"}))
        return out
    choice = payload["choices"][0]
    msg = choice["message"]
    base = {"id": payload["id"], "object": "chat.completion.chunk", "model": payload["model"]}
    out = [ev({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    text = msg.get("content") or ""
    out += [ev({**base, "choices": [{"index": 0, "delta": {"content": text[j:j + 4]}}]}) for j in range(0, len(text), 4)]
    for k, c in enumerate(msg.get("tool_calls") or []):
        out.append(ev({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": k, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": ""}}]}}]}))
        out.append(ev({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": k, "function": {"arguments": c["function"]["arguments"]}}]}}]}))
    out.append(ev({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}))
    out.append(ev({**base, "choices": [], "usage": payload["usage"]}))
    out.append("data: [DONE]\n\n")
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tests.claw.scripted_server SCRIPT.json -- COMMAND ARGS...", file=sys.stderr)
        return 2
    steps = json.loads(Path(argv[0]).read_text())
    with ScriptedLLM(steps) as server:
        env = dict(os.environ, OPENAI_BASE_URL=server.openai_url, ANTHROPIC_BASE_URL=server.url)
        env.pop("OPENAI_API_KEY", None)
        print(f"scripted LLM server at {server.url} ({len(steps)} steps)", file=sys.stderr)
        return subprocess.call(argv[2:], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
