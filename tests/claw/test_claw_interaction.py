"""ask_user mid-conversation and the permission policy (deny / ask / allow on resume), over
both wire formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion.backends.claw.conversation import Conversation
from iterion.store import RunStatus, Store
from iterion.store.errors import StatusRefusedError
from gitrefs.persist import read_model

from .conftest import agent_bot, calls, events, final, launch, resume, tool_errors, tool_results
from .scripted_server import ScriptedLLM


def roles(request: dict) -> list[str]:
    return [m["role"] for m in request["body"]["messages"] if m["role"] != "system"]


def test_ask_user_pauses_and_the_answer_is_the_pending_tool_result(tmp_path: Path, ws: Path, store: Store,
                                                                   llm: ScriptedLLM, provider: str) -> None:
    (ws / "greet.txt").write_text("helo\n")
    bot = agent_bot(tmp_path / "src", provider, extra="interaction: human")
    llm.add(calls(("ask_user", {"question": "Which greeting should I use?"}), ("read_file", {"path": "greet.txt"})))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    assert r.pending["kind"] == "ask_user" and r.pending["question"] == "Which greeting should I use?"
    cp = store.load_checkpoint(r.run_id)
    session = cp.backend_sessions["coder"]
    conv = read_model(store.run_dir(r.run_id) / "conversations" / f"{session}.json", Conversation)
    ask_id = "call_1" if provider == "openai" else "toolu_1"
    assert conv.pending is not None and conv.pending.id == ask_id and conv.pending.kind == "ask_user"
    assert cp.pending_interaction.questions["tool_use_id"] == ask_id
    assert [c["name"] for c in conv.queued] == ["read_file"]  # the call after it waits with it
    assert "coder" not in cp.outputs
    assert any(t["function" if provider == "openai" else "name"] for t in llm.requests[0]["body"]["tools"]
               if (t["function"]["name"] if provider == "openai" else t["name"]) == "ask_user")

    llm.add(calls(("write_file", {"path": "greet.txt", "content": "howdy\n"})), final("used howdy"))
    r2 = resume(store, r.run_id, answers={"answer": "howdy"})
    assert r2.status is RunStatus.FINISHED, r2.error
    assert (ws / "greet.txt").read_text() == "howdy\n"
    after = llm.requests[1]
    results = tool_results(after)
    assert results[ask_id] == "howdy"  # the answer, as the pending tool-use id's result
    assert "helo" in results["call_2" if provider == "openai" else "toolu_2"]  # the queued call ran
    assert roles(after)[:2] == ["user", "assistant"]  # the same conversation, history intact
    first_user = after["body"]["messages"][0 if provider == "anthropic" else 1]
    assert "Fix the greeting" in json.dumps(first_user)
    assert len(llm.requests) == 3 and roles(llm.requests[2])[:len(roles(after))] == roles(after)
    assert store.load_checkpoint(r.run_id).accounting.tokens == 45


def test_deny_rule_is_a_tool_error_and_an_event(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                provider: str) -> None:
    (ws / "keep.txt").write_text("keep\n")
    bot = agent_bot(tmp_path / "src", provider, workflow_extra='permission:\n  deny: ["bash(rm *)"]')
    llm.add(calls(("bash", {"command": "rm -f keep.txt"}), ("bash", {"command": "echo ok"})), final("ok"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert (ws / "keep.txt").exists()
    results = tool_results(llm.requests[1])
    denied = tool_errors(llm.requests[1])
    assert len(denied) == 1 and "denied by the permission policy (rule bash(rm *), workflow)" in results[next(iter(denied))]
    decided = [e.payload for e in events(store, r.run_id, "permission_decided")]
    assert [(d["tool"], d["decision"], d["rule"]) for d in decided] == [("bash", "deny", "bash(rm *)"),
                                                                        ("bash", "allow", None)]


def test_ask_pauses_showing_the_call_and_an_approval_authorizes_exactly_that_call(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider)
    layer = {"source": "launch", "mode": None, "ask": ["write_file(docs/**)"], "allow": [], "deny": []}
    write = ("write_file", {"path": "docs/a.md", "content": "A\n"})
    llm.add(calls(write))
    r = launch(store, bot, ws, permission=layer)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    assert r.pending["permission"]["tool"] == "write_file"
    assert r.pending["permission"]["arguments"] == {"path": "docs/a.md", "content": "A\n"}
    assert not (ws / "docs" / "a.md").exists()
    with pytest.raises(StatusRefusedError, match="permission decision"):
        resume(store, r.run_id)

    llm.add(calls(write))  # the same call again later: asked again (the approval was for one call)
    r2 = resume(store, r.run_id, answers={"approve": "yes"})
    assert r2.status is RunStatus.PAUSED_WAITING_HUMAN, r2.error
    assert (ws / "docs" / "a.md").read_text() == "A\n"
    first_id = "call_1" if provider == "openai" else "toolu_1"
    assert tool_results(llm.requests[1])[first_id].startswith("wrote")

    llm.add(final("declined once"))
    r3 = resume(store, r.run_id, answers={"approve": "no", "reason": "not twice"})
    assert r3.status is RunStatus.FINISHED, r3.error
    second_id = "call_2" if provider == "openai" else "toolu_2"
    assert tool_results(llm.requests[2])[second_id] == "error: the user declined this call: not twice"
    decided = [(e.payload["decision"], e.payload["source"]) for e in events(store, r.run_id, "permission_decided")]
    assert decided == [("ask", "launch"), ("allow", "answer"), ("ask", "launch"), ("deny", "answer")]


def test_an_allow_rule_given_on_resume_authorizes_the_paused_call(tmp_path: Path, ws: Path, store: Store,
                                                                  llm: ScriptedLLM, provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider, workflow_extra="permission: ask")
    llm.add(calls(("bash", {"command": "git status --short > status.txt"})))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN and r.pending["permission"]["tool"] == "bash"
    llm.add(final("saw the status"))
    r2 = resume(store, r.run_id, permission={"source": "resume", "allow": ["bash(git status*)"]})
    assert r2.status is RunStatus.FINISHED, r2.error
    assert (ws / "status.txt").exists()
    doc = store.load_run(r.run_id)
    assert doc.options["permission_layers"][-1]["allow"] == ["bash(git status*)"]  # kept for later resumes
    last = events(store, r.run_id, "permission_decided")[-1].payload
    assert (last["decision"], last["rule"], last["source"]) == ("allow", "bash(git status*)", "resume")


def test_a_malformed_workflow_permission_block_refuses_the_launch(tmp_path: Path, ws: Path, store: Store,
                                                                  llm: ScriptedLLM) -> None:
    from iterion.permissions import PermissionError_

    bot = agent_bot(tmp_path / "src", "openai", workflow_extra='permission:\n  allow: ["bash(git *"]')
    with pytest.raises(PermissionError_, match="TOOL or TOOL"):
        launch(store, bot, ws)
    assert not store.list_runs() and llm.requests == []
