"""claw's MCP client against the reference ``mcp-server-git``: list, call, error, crash."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from iterion.backends.base import BackendError
from iterion.backends.claw.host import AgentHost
from iterion.backends.claw.mcp import McpPool
from iterion.backends.claw.tools import ToolError
from iterion.failure_codes import FailureCode

from ..conftest import make_checkout
from .conftest import mcp_server_git


def git_pool(tmp_path: Path, repo: Path, args: list[str] | None = None) -> tuple[McpPool, list[tuple[str, dict]]]:
    command = mcp_server_git()
    seen: list[tuple[str, dict]] = []
    decl = {"git": {"transport": "stdio", "command": command[0],
                    "args": [*command[1:], *(args if args is not None else ["--repository", str(repo)])]}}
    return McpPool(AgentHost(workspace=repo, emit=lambda t, p: seen.append((t, p)), charge=lambda *_a: None,
                             mcp_declarations=decl, mcp_servers=("git",))), seen


def test_list_call_and_error(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "repo")
    (repo / "new.txt").write_text("x\n")
    pool, seen = git_pool(tmp_path, repo)
    try:
        specs = pool.start(("git",))
        names = {s.name for s in specs}
        assert {"mcp.git.git_status", "mcp.git.git_log", "mcp.git.git_diff_unstaged"} <= names
        status = next(s for s in specs if s.name == "mcp.git.git_status")
        assert status.parameters.get("type") == "object" and "repo_path" in status.parameters.get("properties", {})
        out = pool.call("mcp.git.git_status", {"repo_path": str(repo)})
        assert "new.txt" in out
        log = pool.call("mcp.git.git_log", {"repo_path": str(repo), "max_count": 1})
        assert "initial" in log
        with pytest.raises(ToolError) as info:  # the server's own error reaches the model as a tool error
            pool.call("mcp.git.git_show", {"repo_path": str(repo), "revision": "no-such-revision"})
        assert "no-such-revision" in str(info.value)
    finally:
        pool.stop()
    assert ("mcp_server_stopped", {"server": "git"}) in seen


def test_a_crashed_server_is_a_tool_error_and_stop_returns(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "repo")
    pool, _seen = git_pool(tmp_path, repo)
    try:
        pool.start(("git",))
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_git_server(int(p), repo)]
        assert pids, "the mcp-server-git process was not found"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(ToolError):
            pool.call("mcp.git.git_status", {"repo_path": str(repo)})
    finally:
        pool.stop()  # returns although the server is gone


def test_a_server_that_fails_at_start_shows_its_stderr(tmp_path: Path) -> None:
    missing = tmp_path / "not-a-repo"
    missing.mkdir()
    pool, _seen = git_pool(tmp_path, missing, ["--repository", str(missing)])
    with pytest.raises(BackendError) as info:
        pool.start(("git",))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert info.value.message.startswith("MCP server git failed to start: ")
    assert str(missing) in info.value.message or "git repository" in info.value.message.lower()


def _is_git_server(pid: int, repo: Path) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"mcp_server_git" in cmd and str(repo).encode() in cmd
