"""MCP stdio servers (a server written in the test suite), offered as mcp.<server>.<tool>."""

from __future__ import annotations

import sys
from pathlib import Path

from iterion.store import RunStatus, Store

from .conftest import agent_bot, calls, events, final, launch, tool_errors, tool_results
from .scripted_server import ScriptedLLM

SERVER = Path(__file__).with_name("mcp_echo_server.py")


def mcp_head() -> str:
    return (f'mcp_server echo:\n  transport: stdio\n  command: "{sys.executable}"\n  args: ["{SERVER}"]\n')


def test_agent_calls_an_mcp_tool_under_the_policy(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                  provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider, head=mcp_head(), tools='[read_file, "mcp.echo.*"]',
                    workflow_extra='permission:\n  deny: ["mcp.echo.add"]')
    llm.add(calls(("mcp.echo.echo", {"text": "hi there"}), ("mcp.echo.add", {"a": 2, "b": 3})), final("echoed"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    offered = sorted(t["function"]["name"] if provider == "openai" else t["name"]
                     for t in llm.requests[0]["body"]["tools"])
    assert offered == ["mcp__echo__add", "mcp__echo__echo", "read_file"]
    results = tool_results(llm.requests[1])
    echo_id, add_id = list(results)
    assert results[echo_id] == "HI THERE"
    assert add_id in tool_errors(llm.requests[1]) and "denied" in results[add_id]
    started = events(store, r.run_id, "mcp_server_started")
    assert started and started[0].payload == {"server": "echo", "tools": ["echo", "add"]}
    assert [e.payload["server"] for e in events(store, r.run_id, "mcp_server_stopped")] == ["echo"]
    assert [e.payload["tool"] for e in events(store, r.run_id, "tool_called")] == ["mcp.echo.echo", "mcp.echo.add"]


def test_an_undeclared_mcp_server_fails_the_node_clearly(tmp_path: Path, ws: Path, store: Store,
                                                         llm: ScriptedLLM) -> None:
    bot = agent_bot(tmp_path / "src", "openai", tools='[read_file, "mcp.nosuch.*"]')
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BACKEND_UNAVAILABLE"
    assert "mcp server 'nosuch' is not declared" in (r.error or "")
    assert llm.requests == []
