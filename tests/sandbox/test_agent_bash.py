"""The claw agent's `bash` under `sandbox: auto`, driven by the scripted LLM server over both wire
formats: it writes the workspace but nothing outside, reaches no listening socket without the
network opt-in, sees a private /tmp, and cannot write .git (the model's commands are not the
author's) unless the sandbox block mounts it writable or a permission rule allows it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from ..claw.conftest import agent_bot, calls, final, launch, tool_results
from ..claw.scripted_server import ScriptedLLM
from ..conftest import git
from .conftest import Listener, connect_command


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def bash_results(llm: ScriptedLLM, *commands: str) -> list[str]:
    results = tool_results(llm.requests[1])
    assert len(results) == len(commands), results
    return list(results.values())


def test_agent_bash_is_confined(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, provider: str,
                                outside: Path, listener: Listener) -> None:
    before = outside.read_bytes()
    head = git(ws, "rev-parse", "HEAD").strip()
    commands = (f"printf x >> {outside}; rm -f {outside}; echo done",
                "printf agent > by-agent.txt && cat by-agent.txt",
                connect_command(listener.port),
                "echo probe > /tmp/agent-probe && ls /tmp",
                "touch .git/agent-was-here; git -c user.name=m -c user.email=m@e commit --allow-empty -qm model; "
                "git rev-parse HEAD")
    llm.add(calls(*(("bash", {"command": c}) for c in commands)), final("ok"))
    bot = agent_bot(tmp_path / "src", provider, workflow_extra="sandbox: auto")
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    wrote_out, wrote_in, net, tmp, gitw = bash_results(llm, *commands)
    assert outside.read_bytes() == before and "Read-only file system" in wrote_out
    assert (ws / "by-agent.txt").read_text() == "agent" and "agent" in wrote_in
    assert "refused" in net and listener.accepted == 0
    assert "agent-probe" in tmp and not Path("/tmp/agent-probe").exists()
    assert not (ws / ".git" / "agent-was-here").exists() and "Read-only file system" in gitw
    assert git(ws, "rev-parse", "HEAD").strip() == head


def test_agent_network_and_git_when_granted(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                            listener: Listener) -> None:
    commands = (connect_command(listener.port),
                "git -c user.name=m -c user.email=m@e commit --allow-empty -qm granted && echo committed")
    llm.add(calls(*(("bash", {"command": c}) for c in commands)), final("ok"))
    block = 'sandbox:\n  mode: auto\n  mounts: [".git:rw"]\n  network:\n    mode: open'
    r = launch(store, agent_bot(tmp_path / "src", "openai", workflow_extra=block), ws)
    assert r.status is RunStatus.FINISHED, r.error
    net, gitw = bash_results(llm, *commands)
    assert "connected" in net and listener.accepted == 1
    assert "committed" in gitw and git(ws, "log", "-1", "--format=%s").strip() == "granted"


def test_a_permission_rule_allowing_git_writes_grants_them(tmp_path: Path, ws: Path, store: Store,
                                                           llm: ScriptedLLM) -> None:
    command = "git -c user.name=m -c user.email=m@e commit --allow-empty -qm by-rule && echo committed"
    llm.add(calls(("bash", {"command": command})), final("ok"))
    r = launch(store, agent_bot(tmp_path / "src", "openai", workflow_extra="sandbox: auto"), ws,
               permission={"source": "launch", "mode": None, "allow": ["write_file(.git/**)"], "ask": [], "deny": []})
    assert r.status is RunStatus.FINISHED, r.error
    assert "committed" in bash_results(llm, command)[0]
    assert git(ws, "log", "-1", "--format=%s").strip() == "by-rule"


def test_a_bash_sandbox_that_does_not_start_fails_the_node_typed(tmp_path: Path, ws: Path, store: Store,
                                                                 llm: ScriptedLLM,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from .test_cli_refusals import failing_bwrap

    monkeypatch.setenv("PATH", f"{failing_bwrap(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    llm.add(calls(("bash", {"command": "printf ran > ran.txt"})), final("ok"))
    r = launch(store, agent_bot(tmp_path / "src", "openai", workflow_extra="sandbox: auto"), ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "SANDBOX_SETUP_FAILED", r.error
    assert "Creating new namespace failed" in (r.error or "")
    assert not (ws / "ran.txt").exists()
