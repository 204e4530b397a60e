"""Every request body claw builds, checked against the official SDKs' request types (both wire
formats): tools, tool results, an ask_user resumption, the final-answer turn's JSON output."""

from __future__ import annotations

from pathlib import Path

from iterion.backends.claw.wire import FINAL_ANSWER_TOOL, AnthropicWire, OpenAIWire, Output, ToolSpec
from iterion.store import RunStatus, Store

from .conftest import agent_bot, calls, final, launch, resume
from .scripted_server import ScriptedLLM
from .sdk_shapes import check, check_anthropic, check_openai

READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}},
                                             "required": ["path"]})
OUT = Output("result", {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"],
                        "additionalProperties": False})
HISTORY = [{"role": "user", "content": "Fix it."},
           {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read_file",
                                                                "arguments": {"path": "a"}},
                                                               {"id": "c2", "name": "mcp.git.git_status",
                                                                "arguments": {}}]},
           {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "x", "is_error": False},
           {"role": "tool", "tool_call_id": "c2", "name": "mcp.git.git_status", "content": "error: no",
            "is_error": True}]


def test_a_run_with_tools_ask_user_and_a_final_answer_turn_sends_only_valid_bodies(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, provider: str) -> None:
    (ws / "greet.txt").write_text("helo\n")
    bot = agent_bot(tmp_path / "src", provider, extra="interaction: human")
    llm.add(calls(("ask_user", {"question": "Which greeting?"}), ("read_file", {"path": "greet.txt"})))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    # after the resume: a tool turn, a prose answer (misses the schema), then the final-answer turn
    llm.add(calls(("write_file", {"path": "greet.txt", "content": "howdy\n"})), {"text": "All done!"},
            final("used howdy"))
    r2 = resume(store, r.run_id, answers={"answer": "howdy"})
    assert r2.status is RunStatus.FINISHED, r2.error
    assert r2.outputs["coder"]["summary"] == "used howdy"
    assert len(llm.requests) == 4
    for q in llm.requests:
        check(q["path"], q["body"])
    tool_turn, last = llm.requests[2]["body"], llm.requests[3]["body"]
    if provider == "openai":
        assert "response_format" not in tool_turn and tool_turn["tools"]
        assert "tools" not in last  # the final-answer turn offers none (never `tools: []`)
        assert last["response_format"]["type"] == "json_schema"
        assert last["response_format"]["json_schema"]["schema"]["required"] == ["summary"]
        resumed = llm.requests[1]["body"]["messages"]
        assert any(m["role"] == "tool" and m["content"] == "howdy" for m in resumed)
        assert all(m["content"] == "" for m in resumed if m["role"] == "assistant" and m.get("tool_calls"))
    else:
        assert "tool_choice" not in tool_turn
        assert last["tool_choice"] == {"type": "tool", "name": FINAL_ANSWER_TOOL}
        final_tool = [t for t in last["tools"] if t["name"] == FINAL_ANSWER_TOOL][0]
        assert final_tool["input_schema"]["required"] == ["summary"]


def test_openai_bodies_tools_results_json_and_limits() -> None:
    local = OpenAIWire(5, "http://127.0.0.1:9/v1", json_mode="auto")
    body = local.body(model="smollm2", system="sys", messages=HISTORY, tools=[READ], max_tokens=64,
                      reasoning_effort=None)
    check_openai(body)
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["tools"][0]["function"]["name"] == "read_file"
    assert body["messages"][2]["tool_calls"][1]["function"]["name"] == "mcp__git__git_status"
    done = local.body(model="smollm2", system="sys", messages=HISTORY, tools=[READ], max_tokens=64,
                      reasoning_effort=None, output=OUT, final=True)
    check_openai(done)
    assert "tools" not in done and done["response_format"]["type"] == "json_schema"
    local.json.fell_back = True  # what a refusal naming response_format leaves behind (auto)
    compat = local.body(model="smollm2", system="", messages=HISTORY, tools=[], max_tokens=None,
                        reasoning_effort=None, output=OUT)
    check_openai(compat)
    assert compat["response_format"] == {"type": "json_object", "schema": OUT.schema}
    official = OpenAIWire(5, "https://api.openai.com/v1", api_key="k")
    for model in ("gpt-4.1", "o3", "gpt-5-mini"):
        b = official.body(model=model, system="", messages=HISTORY, tools=[READ], max_tokens=32,
                          reasoning_effort="low")
        check_openai(b)
        assert b["max_completion_tokens"] == 32 and "max_tokens" not in b
    reasoning_elsewhere = local.body(model="openrouter/o4-mini", system="", messages=HISTORY, tools=[],
                                     max_tokens=8, reasoning_effort=None)
    assert reasoning_elsewhere["max_completion_tokens"] == 8


def test_anthropic_bodies_tools_results_and_the_forced_final_answer() -> None:
    wire = AnthropicWire(5, "http://127.0.0.1:9", api_key="k")
    body = wire.body(model="claude-sonnet-4-5", system="sys", messages=HISTORY, tools=[READ], max_tokens=None,
                     reasoning_effort=None)
    check_anthropic(body)
    results = body["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"] and results[1]["is_error"] is True
    judged = wire.body(model="claude-sonnet-4-5", system="", messages=[{"role": "user", "content": "Judge."}],
                       tools=[], max_tokens=100, reasoning_effort=None, output=OUT)
    check_anthropic(judged)
    assert judged["tool_choice"] == {"type": "tool", "name": FINAL_ANSWER_TOOL}
    assert [t["name"] for t in judged["tools"]] == [FINAL_ANSWER_TOOL]


def test_the_checks_bite() -> None:
    """A null content beside tool_calls, an unknown role and an unknown key are each refused."""
    import pytest
    from pydantic import ValidationError

    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(AssertionError, match="content must be a string"):
        check_openai({**base, "messages": [{"role": "assistant", "content": None, "tool_calls": []}]})
    with pytest.raises(ValidationError):
        check_openai({**base, "messages": [{"role": "bogus", "content": "x"}]})
    with pytest.raises(AssertionError, match="does not have"):
        check_openai({**base, "max_tokenz": 3})
    with pytest.raises(ValidationError):
        check_anthropic({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "tool_result"}]}]})


def test_a_refused_request_fails_once_and_is_not_retried(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                         provider: str) -> None:
    """The tool calls before it are not re-run by a retry: the refusal is deterministic."""
    (ws / "greet.txt").write_text("helo\n")
    bot = agent_bot(tmp_path / "src", provider)
    llm.add(calls(("bash", {"command": "echo ran >> ran.log"})),
            {"status": 500, "error": "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
                                     "'content'), 'msg': 'Input should be a valid string'}"})
    r = launch(store, bot, ws)
    assert r.status is not RunStatus.FINISHED
    assert r.failure_code == "REQUEST_REJECTED", r.error
    assert len(llm.requests) == 2
    assert (ws / "ran.log").read_text() == "ran\n"  # the tool ran once: no retry of the node
