"""The codex backend against a fake `codex` executable (a real subprocess): argv, stdin, the JSONL
events, failures, the missing binary, the timeout; then a workflow run through the CLI."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from iterion import ir
from iterion.backends import BackendError, BackendRequest, get_backend
from iterion.backends.codex import CodexBackend
from iterion.failure_codes import FailureCode
from iterion.permissions import build_policy, codex_flags
from tests.conftest import run_cli

VERDICT = ir.Schema("verdict", (ir.SchemaField("approved", ir.FieldType.BOOL),))

# The fake CLI records its argv, stdin and cwd, then plays what $FAKE_CODEX_REPLY holds: events
# (an object is printed as a JSON line, a string as it is), stderr, a child to leave running,
# a sleep, an exit status.
FAKE = f"""#!{sys.executable}
import json, os, subprocess, sys, time
record = {{"argv": sys.argv[1:], "stdin": sys.stdin.read(), "cwd": os.getcwd()}}
with open(os.environ["FAKE_CODEX_LOG"], "a") as f:
    f.write(json.dumps(record) + "\\n")
reply = json.loads(os.environ["FAKE_CODEX_REPLY"])
if reply.get("spawn"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(reply["spawn"], "w") as f:
        f.write(str(child.pid))
for event in reply.get("events", []):
    sys.stdout.write((event if isinstance(event, str) else json.dumps(event)) + "\\n")
    sys.stdout.flush()
sys.stderr.write(reply.get("stderr", ""))
time.sleep(reply.get("sleep", 0))
sys.exit(reply.get("exit", 0))
"""


@pytest.fixture
def fake_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "bin" / "codex"
    exe.parent.mkdir()
    exe.write_text(FAKE)
    exe.chmod(0o755)
    log = tmp_path / "codex-calls.jsonl"
    monkeypatch.setenv("ITERION_CODEX_BIN", str(exe))
    monkeypatch.setenv("FAKE_CODEX_LOG", str(log))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # a custom provider adds --config flags
    return log


def turn(text: str | None, *, thread: str = "th-0199", tin: int = 100, tout: int = 20) -> list[Any]:
    """A turn as the CLI prints it: the thread, some work, the final message, the usage."""
    events: list[Any] = [{"type": "thread.started", "thread_id": thread}, {"type": "turn.started"},
                         {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Plan**"}},
                         {"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                                                           "command": "ls", "status": "in_progress"}},
                         {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                                             "command": "ls", "exit_code": 0, "status": "completed"}}]
    if text is not None:
        events.append({"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": text}})
    events.append({"type": "turn.completed",
                   "usage": {"input_tokens": tin, "cached_input_tokens": 80, "output_tokens": tout}})
    return events


def reply(monkeypatch: pytest.MonkeyPatch, events: list[Any], **more: Any) -> None:
    monkeypatch.setenv("FAKE_CODEX_REPLY", json.dumps({"events": events, **more}))


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_not_installed_names_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("ITERION_CODEX_BIN", raising=False)
    backend = get_backend("codex", {})
    assert backend.availability()[0] is False
    with pytest.raises(BackendError) as info:
        backend.complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert "\n" not in info.value.message
    assert "not installed" in info.value.message and "npm install -g @openai/codex" in info.value.message


def test_a_plain_answer(fake_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, ["codex 0.50 starting (a log line, not an event)",
                        {"type": "some.future.event", "x": 1}, *turn("All done.")])
    ws = tmp_path / "ws"
    ws.mkdir()
    resp = CodexBackend({}).complete(BackendRequest(node_id="impl", model="gpt-5-codex", system="Be brief.",
                                                    user="Fix the bug.", workspace_dir=str(ws)))
    assert (resp.text, resp.output, resp.ask_user) == ("All done.", None, None)
    assert resp.as_output() == {"text": "All done."}
    assert resp.session_id == "th-0199"
    # cached input is a part of input_tokens for OpenAI: not added again
    assert (resp.tokens_in, resp.tokens_out, resp.cost_usd) == (100, 20, 0.0)
    (call,) = calls(fake_codex)
    assert call["argv"] == ["exec", "--json", "--skip-git-repo-check", "--model=gpt-5-codex", "-"]
    # no system-prompt flag: the system prompt heads the prompt on stdin
    assert call["stdin"] == "Be brief.\n\nFix the bug."
    assert Path(call["cwd"]).resolve() == ws.resolve()


def test_structured_output_and_its_instructions(fake_codex: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, turn('Reviewed.\n```json\n{"approved": true}\n```'))
    resp = CodexBackend({}).complete(BackendRequest(node_id="review", system="Be strict.", user="Review the diff.",
                                                    output_schema=VERDICT))
    assert resp.output == {"approved": True}
    stdin = calls(fake_codex)[0]["stdin"]
    assert stdin.startswith("Be strict.\n\nAnswer with one JSON object only") and stdin.endswith("Review the diff.")
    assert '"approved": {"type": "boolean"}' in stdin
    # an answer that misses the schema fails the node, still charging what it used
    reply(monkeypatch, turn('{"approved": "maybe"}', tin=7, tout=3))
    with pytest.raises(BackendError) as info:
        CodexBackend({}).complete(BackendRequest(node_id="review", user="Review.", output_schema=VERDICT))
    assert info.value.code is FailureCode.SCHEMA_VALIDATION
    assert (info.value.tokens_in, info.value.tokens_out) == (7, 3)


def test_ask_user_then_resume_the_thread(fake_codex: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, turn('{"_ask_user": "Which module?"}', thread="th-7"))
    b = CodexBackend({})
    first = b.complete(BackendRequest(node_id="impl", user="Implement it.", allow_ask_user=True))
    assert first.ask_user == "Which module?" and first.session_id == "th-7"
    assert "_ask_user" in calls(fake_codex)[0]["stdin"]  # the convention is explained in the prompt
    reply(monkeypatch, turn("done", thread="th-7"))
    second = b.complete(BackendRequest(node_id="impl", model="o3", user="Implement it.", allow_ask_user=True,
                                       session_id=first.session_id, prior_question="Which module?",
                                       prior_answer="store"))
    assert second.ask_user is None and second.text == "done" and second.session_id == "th-7"
    call = calls(fake_codex)[1]
    # options before `resume` (the documented form), `--` before the id, the prompt from stdin
    assert call["argv"] == ["exec", "--json", "--skip-git-repo-check", "--model=o3", "resume", "--", "th-7", "-"]
    assert call["stdin"] == "store"  # only the answer goes into the reused thread


def test_usage_is_summed_over_turns(fake_codex: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, [*turn("first", tin=100, tout=20), *turn("second", tin=50, tout=5)[1:]])
    resp = CodexBackend({}).complete(BackendRequest(node_id="a", user="hi"))
    assert (resp.tokens_in, resp.tokens_out, resp.text) == (150, 25, "second")


def test_values_that_look_like_options_stay_values(fake_codex: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model name, a session id or a prompt that starts with ``-`` never becomes a flag: the
    model is joined to its option, the id follows ``--``, the prompt goes through stdin."""
    reply(monkeypatch, turn("ok"))
    hostile = "--dangerously-bypass-approvals-and-sandbox"
    CodexBackend({}).complete(BackendRequest(node_id="n", model=hostile, system=hostile, user="-h",
                                             session_id="--last"))
    call = calls(fake_codex)[0]
    assert hostile not in call["argv"] and f"--model={hostile}" in call["argv"]
    assert call["argv"][-4:] == ["resume", "--", "--last", "-"] and "-h" not in call["argv"]
    assert call["stdin"] == f"{hostile}\n\n-h"


@pytest.mark.parametrize("message,code", [
    ("stream error: exceeded retry limit, last status: 429 Too Many Requests", FailureCode.RATE_LIMITED),
    ("You've hit your usage limit. Try again in 3 hours.", FailureCode.USAGE_LIMIT_BLOCKED),
    ("unexpected status 401 Unauthorized: Incorrect API key provided", FailureCode.AUTH_FAILED),
    ("Your input exceeds the context window of this model", FailureCode.CONTEXT_LENGTH_EXCEEDED),
    ("something odd happened", FailureCode.EXECUTION_FAILED),
])
def test_a_failed_turn_is_typed(fake_codex: Path, monkeypatch: pytest.MonkeyPatch, message: str,
                                code: FailureCode) -> None:
    reply(monkeypatch, [{"type": "thread.started", "thread_id": "th-1"}, {"type": "turn.started"},
                        {"type": "error", "message": message},
                        {"type": "turn.failed", "error": {"message": message}}], exit=1)
    with pytest.raises(BackendError) as info:
        CodexBackend({}).complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is code
    assert message in info.value.message and "\n" not in info.value.message


def test_an_error_event_the_turn_recovered_from_is_not_a_failure(fake_codex: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    events = turn("fine")
    events.insert(2, {"type": "error", "message": "Reconnecting... 1/5"})
    reply(monkeypatch, events)
    assert CodexBackend({}).complete(BackendRequest(node_id="a", user="hi")).text == "fine"


def test_garbage_or_a_cut_off_stream_is_a_clear_error(fake_codex: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, ["Segmentation fault"], stderr="core dumped", exit=139)
    with pytest.raises(BackendError) as info:
        CodexBackend({}).complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is FailureCode.EXECUTION_FAILED
    assert "no JSON events on stdout" in info.value.message and "core dumped" in info.value.message
    # events, but the process died before the turn completed
    reply(monkeypatch, [{"type": "thread.started", "thread_id": "th-1"}, {"type": "turn.started"}], exit=1,
          stderr="panicked at 'boom'")
    with pytest.raises(BackendError, match="panicked at 'boom'") as info:
        CodexBackend({}).complete(BackendRequest(node_id="a", user="hi"))
    assert info.value.code is FailureCode.EXECUTION_FAILED


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return True


def test_a_timeout_kills_the_process_group(fake_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "child.pid"
    reply(monkeypatch, [{"type": "thread.started", "thread_id": "th-1"}], spawn=str(pidfile), sleep=60)
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        CodexBackend({}).complete(BackendRequest(node_id="slow", user="hi", timeout_s=1.0))
    assert info.value.code is FailureCode.TIMEOUT and "within 1s" in info.value.message
    assert time.monotonic() - started < 30
    child = int(pidfile.read_text())  # a command the agent started is stopped with it
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)


def test_explicit_binary_option(fake_codex: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, turn("ok"))
    monkeypatch.delenv("ITERION_CODEX_BIN")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    b = CodexBackend({"codex_bin": str(tmp_path / "bin" / "codex")})
    assert b.availability()[0] and b.complete(BackendRequest(node_id="a", user="hi")).text == "ok"


def test_the_sandbox_follows_readonly_and_the_permission_mode() -> None:
    assert codex_flags(build_policy(None)) == []  # nothing set: the CLI's own configuration
    assert codex_flags(build_policy(None), readonly=True) == ["--sandbox=read-only"]
    assert codex_flags(build_policy("allow")) == ["--sandbox=workspace-write"]
    assert codex_flags(build_policy("allow"), readonly=True) == ["--sandbox=read-only"]
    assert codex_flags(build_policy("ask")) == ["--sandbox=read-only"]
    assert codex_flags(build_policy("allow", [{"source": "launch", "mode": "deny"}])) == ["--sandbox=read-only"]
    # rules have no counterpart on the codex command line
    assert codex_flags(build_policy(None, [{"source": "launch", "allow": ["bash(git *)"]}])) == []


WORKFLOW = """\
schema verdict:
  approved: bool

agent review:
  backend: codex
  model: "gpt-5-codex"
  readonly: true
  user: "Review the change."
  output: verdict

agent note:
  backend: codex
  user: "Write the notes."

workflow w:
  entry: review
  review -> note
  note -> done
"""


def test_a_workflow_naming_codex_runs_through_the_cli(fake_codex: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    reply(monkeypatch, turn('{"approved": true}'))
    bot = tmp_path / "review.bot"
    bot.write_text(WORKFLOW)
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    proc = run_cli("run", str(bot), "--workspace", str(ws), "--json", cwd=tmp_path, env=env,
                   store=tmp_path / "store")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "finished"
    assert result["outputs"]["review"] == {"approved": True, "_session_id": "th-0199"}
    review, note = calls(fake_codex)
    assert review["argv"] == ["exec", "--json", "--skip-git-repo-check", "--model=gpt-5-codex",
                              "--sandbox=read-only", "-"]
    assert note["argv"] == ["exec", "--json", "--skip-git-repo-check", "-"]  # no mode set: no sandbox flag
    assert "Review the change." in review["stdin"] and '"approved"' in review["stdin"]
    assert Path(review["cwd"]).resolve() == ws.resolve()


def test_a_workflow_naming_codex_without_the_cli_is_refused_with_the_hint(tmp_path: Path) -> None:
    bot = tmp_path / "review.bot"
    bot.write_text(WORKFLOW)
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env["ITERION_CODEX_BIN"] = str(tmp_path / "missing" / "codex")
    proc = run_cli("run", str(bot), "--workspace", str(ws), "--json", cwd=tmp_path, env=env,
                   store=tmp_path / "store")
    # refused before the run exists (issue 34 point 4): exit 2, one line with the install hint
    assert proc.returncode == 2, proc.stderr
    error = proc.stderr.splitlines()[0]
    assert "cannot start: node review runs on codex" in error and "no run was created" in error
    assert "npm install -g @openai/codex" in error and "$ITERION_CODEX_BIN" in error
    runs = tmp_path / "store" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_the_workflows_permission_rules_are_named_as_not_passed_to_codex() -> None:
    from iterion.dsl import load_tree
    from iterion.engine.declared import not_enforced

    src = WORKFLOW.replace("  entry: review\n", '  entry: review\n  permission:\n    mode: "allow"\n'
                                                 '    deny: ["bash(rm *)"]\n')
    result = load_tree({"x.bot": src}, "x.bot", env={})
    assert result.workflow is not None, result.diagnostics
    gaps = [g for g in not_enforced(result.workflow) if g["feature"] == "permission"]
    assert [g["node"] for g in gaps] == ["note", "review"]
    assert "not passed to node note's codex CLI" in gaps[0]["message"]
    mode_only = load_tree({"x.bot": WORKFLOW.replace("  entry: review\n", '  entry: review\n  permission: "deny"\n')},
                          "x.bot", env={}).workflow
    assert mode_only is not None and not [g for g in not_enforced(mode_only) if g["feature"] == "permission"]
