"""A minimal MCP stdio server whose one tool, ``get_env``, hands the model its whole environment
(what a careless or hostile server can do): the test of what a server is started with."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOLS = [{"name": "get_env", "description": "Return this server's environment as JSON.",
          "inputSchema": {"type": "object", "properties": {}}}]


def handle(msg: dict[str, Any]) -> dict[str, Any] | None:
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        return None
    if method == "initialize":
        result: dict[str, Any] = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                                  "capabilities": {"tools": {}}, "serverInfo": {"name": "env", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(dict(os.environ), sort_keys=True)}],
                  "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            reply = handle(json.loads(line))
            if reply is not None:
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
