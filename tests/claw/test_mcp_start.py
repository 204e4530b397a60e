"""An MCP server that cannot start: its stderr is in the one-line error; one that hangs is stopped
at the start timeout (its process ends, nothing escapes)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from iterion.backends.base import BackendError
from iterion.backends.claw.host import AgentHost
from iterion.backends.claw.mcp import McpPool
from iterion.failure_codes import FailureCode


def pool(tmp_path: Path, code: str) -> McpPool:
    decl = {"bad": {"transport": "stdio", "command": sys.executable, "args": ["-c", code]}}
    return McpPool(AgentHost(workspace=tmp_path, emit=lambda _t, _p: None, charge=lambda *_a: None,
                             mcp_declarations=decl, mcp_servers=("bad",)))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose: its state in /proc is Z
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_a_server_that_dies_at_start_shows_its_stderr(tmp_path: Path) -> None:
    p = pool(tmp_path, "import sys; print('boom: GITHUB_TOKEN is not set', file=sys.stderr); sys.exit(3)")
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        p.start(("bad",))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert info.value.message == "MCP server bad failed to start: boom: GITHUB_TOKEN is not set"
    assert time.monotonic() - started < 25  # not the 30 s start timeout


def test_a_server_hanging_at_start_is_stopped_at_its_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_MCP_START_TIMEOUT", "1")
    pidfile = tmp_path / "pid"
    p = pool(tmp_path, f"import os, sys, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
                       "print('loading plugins...', file=sys.stderr, flush=True); time.sleep(600)")
    with pytest.raises(BackendError) as info:
        p.start(("bad",))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert info.value.message.startswith("MCP server bad did not start within 1s ($ITERION_MCP_START_TIMEOUT)")
    assert "loading plugins..." in info.value.message
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the hanging MCP server outlived its start timeout"
