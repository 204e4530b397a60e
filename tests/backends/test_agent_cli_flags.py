"""The agent CLIs as their real versions expect them (claude 2.1, codex 0.171): fake `claude` and
`codex` executables record argv, stdin and the environment; the exact flags are asserted."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from iterion.backends import BackendError, BackendRequest
from iterion.backends.claude_code import ClaudeCodeBackend
from iterion.backends.codex import CodexBackend
from iterion.failure_codes import TABLE, FailureCode, Retry

RECORDER = f"""#!{sys.executable}
import json, os, sys
record = {{"argv": sys.argv[1:], "stdin": sys.stdin.read(),
           "env": {{k: os.environ.get(k) for k in ("IS_SANDBOX", "OPENAI_API_KEY", "OPENAI_BASE_URL")}}}}
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps(record) + "\\n")
sys.stdout.write(os.environ["FAKE_REPLY"])
"""
CLAUDE_REPLY = json.dumps({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1",
                           "result": "ok", "usage": {"input_tokens": 1, "output_tokens": 1}})
CODEX_REPLY = "\n".join(json.dumps(e) for e in (
    {"type": "thread.started", "thread_id": "th-1"},
    {"type": "item.completed", "item": {"type": "agent_message", "text": "ok"}},
    {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})) + "\n"


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("claude", "codex"):
        (bindir / name).write_text(RECORDER)
        (bindir / name).chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    for var in ("ITERION_CLAUDE_BIN", "ITERION_CODEX_BIN", "OPENAI_BASE_URL", "OPENAI_API_KEY", "IS_SANDBOX"):
        monkeypatch.delenv(var, raising=False)
    return log


def recorded(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def claude(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> None:
    monkeypatch.setenv("FAKE_REPLY", CLAUDE_REPLY)
    ClaudeCodeBackend({}).complete(BackendRequest(node_id="n", user="Fix it.", **kw))


def test_claude_tool_names_and_the_model_without_its_prefix(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claude(monkeypatch, model="anthropic/claude-sonnet-4-6",
           tools=("read_file", "write_file", "edit_file", "bash", "grep", "glob", "ask_user", "mcp.github.get_issue",
                  "Read"))
    argv = recorded(fakes)[0]["argv"]
    assert "--model=claude-sonnet-4-6" in argv
    assert "--allowedTools=Read,Write,Edit,Bash,Grep,Glob,mcp__github__get_issue" in argv


def test_claude_refuses_a_tool_it_has_no_name_for(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BackendError) as info:
        claude(monkeypatch, tools=("read_file", "web_fetch"))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert TABLE[info.value.code].retry is Retry.DETERMINISTIC
    assert "web_fetch" in info.value.message and "read_file->Read" in info.value.message
    assert not fakes.exists()  # the CLI never ran


def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # what the backend sees; the fake CLI runs as we are


def test_root_bypass_permissions_outside_iterions_sandbox_is_a_clear_deterministic_error(
        fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    as_root(monkeypatch)
    with pytest.raises(BackendError) as info:
        claude(monkeypatch, permission_flags=("--permission-mode=bypassPermissions",))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert "non-root user" in info.value.message and "bubblewrap sandbox" in info.value.message
    assert not fakes.exists()


def test_root_bypass_permissions_inside_iterions_sandbox_sets_is_sandbox(fakes: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import iterion.backends.claude_code as cc

    as_root(monkeypatch)

    monkeypatch.setattr(cc, "iterion_sandbox_active", lambda _request: True)  # the sandbox work's hook
    claude(monkeypatch, permission_flags=("--permission-mode=bypassPermissions",))
    call = recorded(fakes)[0]
    assert call["env"]["IS_SANDBOX"] == "1" and "--permission-mode=bypassPermissions" in call["argv"]


def test_claude_without_bypass_gets_no_is_sandbox(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claude(monkeypatch, permission_flags=("--permission-mode=default",))
    assert recorded(fakes)[0]["env"]["IS_SANDBOX"] is None


def test_claude_resume_sends_only_the_answer(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claude(monkeypatch, system="Be brief.", session_id="s-1", prior_question="Which file?",
           prior_answer={"file": "a.py"})
    call = recorded(fakes)[0]
    assert call["stdin"] == '{"file": "a.py"}'
    assert "--resume=s-1" in call["argv"]
    assert not any(a.startswith("--append-system-prompt") for a in call["argv"])


def codex(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> None:
    monkeypatch.setenv("FAKE_REPLY", CODEX_REPLY)
    CodexBackend({}).complete(BackendRequest(node_id="n", user="Fix it.", **kw))


def test_codex_model_prefix_and_a_local_endpoint_through_the_responses_api(fakes: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    codex(monkeypatch, model="openai/gpt-5-codex")
    plain = recorded(fakes)[0]["argv"]
    assert plain == ["exec", "--json", "--skip-git-repo-check", "--model=gpt-5-codex", "-"]
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "ollama")
    codex(monkeypatch, model="qwen2.5-coder:7b")
    argv = recorded(fakes)[1]["argv"]
    assert argv == ["exec", "--json", "--skip-git-repo-check", "--model=qwen2.5-coder:7b",
                    '--config=model_providers.iterion={ name = "iterion", base_url = "http://127.0.0.1:11434/v1", '
                    'wire_api = "responses", env_key = "OPENAI_API_KEY" }',
                    '--config=model_provider="iterion"', "-"]
    import tomllib

    table = tomllib.loads(argv[4].split("=", 1)[1])  # the value parses as TOML, as the CLI reads it
    assert table["model_providers"]["iterion"]["wire_api"] == "responses"


def test_codex_resume_sends_only_the_answer(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codex(monkeypatch, system="Be brief.", session_id="th-1", prior_question="Which?", prior_answer="b.py")
    call = recorded(fakes)[0]
    assert call["stdin"] == "b.py" and call["argv"][-4:] == ["resume", "--", "th-1", "-"]
