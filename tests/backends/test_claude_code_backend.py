"""The claude_code backend: the not-installed path, and a fake `claude` executable on PATH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from iterion import ir
from iterion.backends import BackendError, BackendRequest, get_backend
from iterion.backends.claude_code import ClaudeCodeBackend
from iterion.failure_codes import FailureCode

VERDICT = ir.Schema("verdict", (ir.SchemaField("approved", ir.FieldType.BOOL),))

# The fake CLI records its argv, stdin and cwd, then answers with what $FAKE_CLAUDE_REPLY holds.
FAKE = f"""#!{sys.executable}
import json, os, sys, time
record = {{"argv": sys.argv[1:], "stdin": sys.stdin.read(), "cwd": os.getcwd()}}
with open(os.environ["FAKE_CLAUDE_LOG"], "a") as f:
    f.write(json.dumps(record) + "\\n")
reply = json.loads(os.environ["FAKE_CLAUDE_REPLY"])
if isinstance(reply, str):  # raw text, e.g. a crash banner instead of JSON
    sys.stdout.write(reply)
    sys.exit(int(os.environ.get("FAKE_CLAUDE_EXIT", "0")))
time.sleep(reply.pop("_sleep", 0))
sys.stdout.write(json.dumps(reply))
sys.exit(int(os.environ.get("FAKE_CLAUDE_EXIT", "0")))
"""


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "claude"
    exe.write_text(FAKE)
    exe.chmod(0o755)
    log = tmp_path / "claude-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))
    monkeypatch.delenv("ITERION_CLAUDE_BIN", raising=False)
    return log


def reply(monkeypatch: pytest.MonkeyPatch, **data: object) -> None:
    base: dict[str, object] = {"type": "result", "subtype": "success", "is_error": False, "session_id": "sess-42",
                               "total_cost_usd": 0.0123, "usage": {"input_tokens": 100, "output_tokens": 20,
                                                                   "cache_read_input_tokens": 5}}
    monkeypatch.setenv("FAKE_CLAUDE_REPLY", json.dumps({**base, **data}))


def calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_not_installed_names_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("ITERION_CLAUDE_BIN", raising=False)
    with pytest.raises(BackendError) as info:
        get_backend("claude_code", {}).complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert "not installed" in info.value.message and "npm install -g @anthropic-ai/claude-code" in info.value.message


def test_delegates_and_accounts(fake_claude: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, result='{"approved": true}')
    ws = tmp_path / "ws"
    ws.mkdir()
    resp = ClaudeCodeBackend({}).complete(BackendRequest(
        node_id="review", model="sonnet", system="Be strict.", user="Review the diff.", output_schema=VERDICT,
        tools=("Read", "Grep"), workspace_dir=str(ws)))
    assert resp.output == {"approved": True}
    assert resp.session_id == "sess-42"
    assert (resp.tokens_in, resp.tokens_out, resp.cost_usd) == (105, 20, 0.0123)
    call = calls(fake_claude)[0]
    argv = call["argv"]
    assert isinstance(argv, list)
    assert argv[:3] == ["-p", "--output-format", "json"]
    assert "--model=sonnet" in argv and "--allowedTools=Read,Grep" in argv
    system = [a for a in argv if a.startswith("--append-system-prompt=")]
    assert len(system) == 1 and "Be strict." in system[0]
    assert not any(a.startswith("--resume") for a in argv)
    assert call["stdin"] == "Review the diff."
    assert Path(str(call["cwd"])).resolve() == ws.resolve()


def test_session_reuse_after_ask_user(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, result='{"_ask_user": "Which module?"}')
    b = ClaudeCodeBackend({})
    first = b.complete(BackendRequest(node_id="impl", user="Implement it.", allow_ask_user=True))
    assert first.ask_user == "Which module?" and first.session_id == "sess-42"
    reply(monkeypatch, result="done", session_id="sess-42")
    second = b.complete(BackendRequest(node_id="impl", user="Implement it.", allow_ask_user=True,
                                       session_id=first.session_id, prior_question="Which module?",
                                       prior_answer="store"))
    assert second.ask_user is None and second.text == "done"
    argv = calls(fake_claude)[1]["argv"]
    assert isinstance(argv, list) and "--resume=sess-42" in argv
    assert calls(fake_claude)[1]["stdin"] == "store"  # only the answer goes into the reused session


def test_values_that_look_like_options_stay_values(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A system prompt that starts with a model's text, or a session id from an earlier reply, is
    joined to its option (``--opt=VALUE``): `--dangerously-skip-permissions` cannot become a flag."""
    reply(monkeypatch, result="ok")
    hostile = "--dangerously-skip-permissions"
    ClaudeCodeBackend({}).complete(BackendRequest(node_id="n", system=hostile, user="hi", session_id="-x"))
    argv = calls(fake_claude)[0]["argv"]
    assert isinstance(argv, list) and hostile not in argv and "-x" not in argv
    assert f"--append-system-prompt={hostile}" in argv and "--resume=-x" in argv


@pytest.mark.parametrize("text,code", [
    ("Claude AI usage limit reached|1760000000", FailureCode.USAGE_LIMIT_BLOCKED),
    ("API Error: 429 rate_limit_error", FailureCode.RATE_LIMITED),
    ("Invalid API key · Please run /login", FailureCode.AUTH_FAILED),
    ("Prompt is too long", FailureCode.CONTEXT_LENGTH_EXCEEDED),
    ("something odd happened", FailureCode.EXECUTION_FAILED),
])
def test_errors_are_typed(fake_claude: Path, monkeypatch: pytest.MonkeyPatch, text: str, code: FailureCode) -> None:
    reply(monkeypatch, is_error=True, result=text)
    monkeypatch.setenv("FAKE_CLAUDE_EXIT", "1")
    with pytest.raises(BackendError) as info:
        ClaudeCodeBackend({}).complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is code
    assert info.value.cost_usd == 0.0123  # a failed call still reports what it spent


def test_unparseable_output_and_timeout(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_REPLY", json.dumps("Segmentation fault"))
    monkeypatch.setenv("FAKE_CLAUDE_EXIT", "139")
    with pytest.raises(BackendError, match="Segmentation fault") as info:
        ClaudeCodeBackend({}).complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is FailureCode.EXECUTION_FAILED
    monkeypatch.setenv("FAKE_CLAUDE_EXIT", "0")
    reply(monkeypatch, _sleep=30, result="late")
    with pytest.raises(BackendError) as info:
        ClaudeCodeBackend({}).complete(BackendRequest(node_id="a", user="hi", timeout_s=0.5))
    assert info.value.code is FailureCode.TIMEOUT


def test_explicit_binary_option(fake_claude: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, result="ok")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    b = ClaudeCodeBackend({"claude_bin": str(tmp_path / "bin" / "claude")})
    assert b.complete(BackendRequest(node_id="a", user="hi")).text == "ok"
