"""The claw tool loop over both wire formats, against the scripted server (real HTTP)."""

from __future__ import annotations

from pathlib import Path

from iterion.failure_codes import auto_resume_decision
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.store import RunStatus, Store

from .conftest import agent_bot, calls, events, final, launch, resume, tool_errors, tool_results
from .scripted_server import ScriptedLLM


def test_agent_reads_edits_writes_then_rewind_restores_and_replays(tmp_path: Path, ws: Path, store: Store,
                                                                   llm: ScriptedLLM, provider: str) -> None:
    (ws / "greet.txt").write_text("helo world\n")
    bot = agent_bot(tmp_path / "src", provider, gate=True)
    llm.add(calls(("read_file", {"path": "greet.txt"}), ("list_dir", {"path": "."})),
            calls(("edit_file", {"path": "greet.txt", "old": "helo", "new": "hello"}),
                  ("write_file", {"path": "notes/fix.md", "content": "# fixed\n"})),
            calls(("bash", {"command": "cat greet.txt notes/fix.md | wc -l"})),
            final("fixed the typo"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    assert r.outputs["coder"]["summary"] == "fixed the typo"
    assert r.outputs["coder"]["_session_id"].startswith("claw-")
    assert (ws / "greet.txt").read_text() == "hello world\n"
    assert (ws / "notes" / "fix.md").read_text() == "# fixed\n"

    reqs = llm.requests
    assert len(reqs) == 4
    expected_path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    assert all(q["path"] == expected_path for q in reqs)
    tool_names = sorted(t["function"]["name"] if provider == "openai" else t["name"] for t in reqs[0]["body"]["tools"])
    assert tool_names == sorted(["read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "bash"])
    second = tool_results(reqs[1])
    assert "helo world" in second[next(iter(second))]  # read_file's result, under the model's tool-use id
    assert any("greet.txt" in v for v in second.values())  # list_dir
    third = tool_results(reqs[3])
    assert any(v.startswith("[exit 0]") and "2" in v for v in third.values())  # bash ran in the workspace
    assert not tool_errors(reqs[3])

    called = events(store, r.run_id, "tool_called")
    assert [e.payload["tool"] for e in called] == ["read_file", "list_dir", "edit_file", "write_file", "bash"]
    assert all(e.payload["error"] is None and e.payload["result_bytes"] > 0 and len(e.payload["args_digest"]) == 16
               for e in called)
    charged = events(store, r.run_id, "backend_call")
    assert len(charged) == 4 and all(e.payload["tokens"] == 15 for e in charged)  # every turn charged
    assert store.load_checkpoint(r.run_id).accounting.tokens == 60

    # rewind the node: its files go back, and the replay runs the loop again
    res = rewind_run(store, RewindRequest(run_id=r.run_id, node="coder"))
    assert res.dropped_nodes == ["coder", "review"]
    assert (ws / "greet.txt").read_text() == "helo world\n"
    assert not (ws / "notes" / "fix.md").exists()
    assert store.load_checkpoint(r.run_id).backend_sessions == {}  # the conversation is not rehydrated
    llm.add(calls(("write_file", {"path": "greet.txt", "content": "hi world\n"})), final("rewrote it"))
    r2 = resume(store, r.run_id)
    assert r2.status is RunStatus.PAUSED_WAITING_HUMAN, r2.error
    assert (ws / "greet.txt").read_text() == "hi world\n"
    assert len(llm.requests) == 6
    replay_first = llm.requests[4]["body"]["messages"]
    assert len([m for m in replay_first if m["role"] != "system"]) == 1  # a fresh conversation


def test_tool_max_steps_exhausted_fails_the_node(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                 provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider, extra="tool_max_steps: 2")
    llm.add({**calls(("list_dir", {"path": "."})), "repeat": True})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE
    assert r.failure_code == "TOOL_STEPS_EXHAUSTED" and "tool_max_steps (2)" in (r.error or "")
    assert "raise tool_max_steps" in (r.error or "")
    # a cap, not a transient fault: one attempt (2 tool turns + the turn that hit the cap), no
    # in-run retry (EXECUTION_FAILED was retried twice: 3x the model calls)
    assert len(llm.requests) == 3
    assert len(events(store, r.run_id, "tool_called")) == 2
    # and no unattended retry either (--auto-resume, the queue runner)
    assert not auto_resume_decision(r.failure_code).allowed


def test_path_escapes_are_tool_errors_the_model_sees(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                     provider: str) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    (ws / "link").symlink_to(tmp_path)
    bot = agent_bot(tmp_path / "src", provider)
    llm.add(calls(("read_file", {"path": "../secret.txt"}), ("read_file", {"path": str(outside)}),
                  ("write_file", {"path": "link/secret.txt", "content": "pwned"}),
                  ("edit_file", {"path": "README.md", "old": "nothing like this", "new": "x"})),
            final("could not"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert outside.read_text() == "secret\n"
    results = tool_results(llm.requests[1])
    assert len(results) == 4 and tool_errors(llm.requests[1]) == set(results)
    texts = list(results.values())
    assert all("outside the workspace" in t for t in texts[:3])
    assert "through a symlink" in texts[2]
    assert "does not occur" in texts[3]
    assert [e.payload["error"] is not None for e in events(store, r.run_id, "tool_called")] == [True] * 4


def test_schema_miss_gets_one_repair_turn_then_fails(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                     provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider)
    llm.add({"text": "no json here"}, final("repaired"))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["coder"]["summary"] == "repaired"
    last = llm.requests[1]["body"]["messages"][-1]
    text = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    assert "not accepted" in text

    llm.add({"text": "{\"wrong\": 1}", "repeat": True})
    r2 = launch(store, bot, ws)
    assert r2.status is RunStatus.FAILED_RESUMABLE and r2.failure_code == "SCHEMA_VALIDATION"


def test_transport_errors_map_like_the_openai_backend(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                      provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider)
    llm.add({"status": 401, "error": "bad key", "error_type": "authentication_error"})
    r = launch(store, bot, ws)
    assert r.failure_code == "AUTH_FAILED"
    assert ("$ANTHROPIC_API_KEY" if provider == "anthropic" else "$OPENAI_API_KEY") in (r.error or "")


def test_a_budget_cap_stops_the_loop_between_turns(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                   provider: str) -> None:
    bot = agent_bot(tmp_path / "src", provider, workflow_extra="budget:\n  max_tokens: 20")
    llm.add(calls(("write_file", {"path": "one.txt", "content": "1"})),
            calls(("write_file", {"path": "two.txt", "content": "2"})), final())
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BUDGET_EXCEEDED"
    assert (ws / "one.txt").exists() and not (ws / "two.txt").exists()  # stopped before the 2nd turn's tools
    assert len(llm.requests) == 2
    assert store.load_checkpoint(r.run_id).accounting.tokens == 30  # both turns charged
