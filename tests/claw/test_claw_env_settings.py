"""Timeouts a claw node reads from the environment (``$ITERION_OPENAI_TIMEOUT``,
``$ITERION_MCP_START_TIMEOUT``, ``$ITERION_MCP_CALL_TIMEOUT``): a garbage value fails the node the
way a missing API key does (BACKEND_UNAVAILABLE, failed_resumable: fix it, then resume), the
failure naming the variable and the value, before any model call or MCP server start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from .conftest import agent_bot, calls, events, final, launch
from .scripted_server import ScriptedLLM

SERVER = Path(__file__).with_name("mcp_echo_server.py")
MCP_HEAD = f'mcp_server echo:\n  transport: stdio\n  command: "{sys.executable}"\n  args: ["{SERVER}"]\n'


@pytest.mark.parametrize(("name", "raw"), [("ITERION_OPENAI_TIMEOUT", "abc"), ("ITERION_MCP_START_TIMEOUT", "-1"),
                                           ("ITERION_MCP_CALL_TIMEOUT", "1e999")])
def test_a_garbage_timeout_fails_the_node_naming_the_variable(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                              monkeypatch: pytest.MonkeyPatch, name: str,
                                                              raw: str) -> None:
    monkeypatch.setenv(name, raw)
    bot = agent_bot(tmp_path / "src", "openai", head=MCP_HEAD, tools='[read_file, "mcp.echo.*"]')
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BACKEND_UNAVAILABLE", (r.status, r.error)
    assert f"${name}={raw!r} is not a number of seconds > 0" in (r.error or "")
    assert "\n" not in (r.error or "") and "Traceback" not in (r.error or "")
    assert llm.requests == [] and events(store, r.run_id, "mcp_server_started") == []


def test_valid_timeouts_are_used(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ITERION_OPENAI_TIMEOUT", "ITERION_MCP_START_TIMEOUT", "ITERION_MCP_CALL_TIMEOUT"):
        monkeypatch.setenv(name, "45")
    bot = agent_bot(tmp_path / "src", "openai", head=MCP_HEAD, tools='[read_file, "mcp.echo.*"]')
    llm.add(calls(("mcp.echo.echo", {"text": "hi"})), final("echoed"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert [e.payload["server"] for e in events(store, r.run_id, "mcp_server_started")] == ["echo"]
