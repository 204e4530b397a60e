"""A minimal MCP stdio server written for the tests (JSON-RPC 2.0, one message per line):
``initialize``, ``tools/list`` and ``tools/call`` for two tools, ``echo`` and ``add``."""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {"name": "echo", "description": "Echo a text back, upper-cased.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "add", "description": "Add two integers.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"]}},
]


def handle(msg: dict[str, Any]) -> dict[str, Any] | None:
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:  # a notification (notifications/initialized)
        return None
    if method == "initialize":
        result: dict[str, Any] = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                                  "capabilities": {"tools": {}}, "serverInfo": {"name": "echo", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        if name == "echo":
            result = {"content": [{"type": "text", "text": str(args.get("text", "")).upper()}], "isError": False}
        elif name == "add":
            result = {"content": [{"type": "text", "text": str(int(args["a"]) + int(args["b"]))}], "isError": False}
        else:
            result = {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = handle(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
