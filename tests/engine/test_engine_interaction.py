"""Agents that ask the user mid-node, and human gates answered by a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.engine.errors import EngineError
from iterion.store import RunStatus, Store

from .conftest import events, labels, launch, resume, write_bot

# asks and resumes in one process: versioned in memory (the mechanisms have their own tests)
pytestmark = pytest.mark.usefixtures("memory_versioning")


def test_agent_ask_user_parks_the_node_and_resume_reinvokes_it(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema plan:
          branch: string

        agent planner:
          backend: "script"
          output: plan
          interaction: human
          user: "plan the work"

        workflow a:
          entry: planner
          planner -> done
    """, {"planner": {"*": {"ask_user": "Which branch?", "session_id": "sess-1",
                            "after_answer": {"output": {"branch": "release"}}}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    assert r.pending["kind"] == "ask_user" and r.pending["question"] == "Which branch?"
    cp = store.load_checkpoint(r.run_id)
    assert cp.pending_interaction.kind == "ask_user" and cp.backend_sessions == {"planner": "sess-1"}
    assert "planner" not in cp.outputs  # the node has not completed
    assert events(store, r.run_id, "ask_user_requested")
    # the printed command's placeholder is no answer (issue 34 point 3), even without a schema
    with pytest.raises(EngineError, match="placeholder of the printed command"):
        resume(store, r.run_id, answers={"answer": "<text>"})
    r2 = resume(store, r.run_id, answers={"answer": "release"})
    assert r2.status is RunStatus.FINISHED, r2.error
    # the session the backend kept rides along as the runtime field _session_id (dsl.md §5.1)
    assert r2.outputs["planner"] == {"branch": "release", "_session_id": "sess-1"}
    assert labels(store, r.run_id) == ["pre:planner:0", "pause:planner:0", "resume:planner:0", "nodes:planner:0"]
    # versioned in memory, and the resume found the chain the launch recorded
    assert {e.payload["mechanism"] for e in events(store, r.run_id, "boundary_written")} == {"memory"}


def test_human_gate_answered_by_a_model(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema approval:
          approved: bool

        human gate:
          interaction: llm
          model: "m"
          output: approval
          instructions: "approve?"

        workflow h:
          entry: gate
          gate -> done when approved
          gate -> fail when not approved
    """, {"gate": {"*": {"output": {"approved": True}, "tokens_in": 4, "tokens_out": 1}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["gate"] == {"approved": True}
    assert store.load_checkpoint(r.run_id).accounting.tokens == 5


def test_backend_error_code_lands_on_the_run(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        agent a:
          backend: "script"
          user: "hi"

        workflow e:
          entry: a
          a -> done
    """, {"a": {"*": {"error": {"code": "RATE_LIMITED", "message": "slow down"}}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "RATE_LIMITED"
    assert "slow down" in r.error


def test_an_agent_question_is_answered_by_the_interaction_model(tmp_path: Path, ws: Path, store: Store) -> None:
    """interaction: llm (here the workflow's default): the interaction model answers, the agent
    goes on with the answer, the run never pauses (dsl.md §2.4)."""
    bot = write_bot(tmp_path / "src", """
        schema plan:
          branch: string

        prompt guide:
          Answer with a branch name.

        agent planner:
          model: "m-plan"
          interaction: none
          interaction_model: "m-answer"
          interaction_prompt: guide
          output: plan
          user: "plan"

        workflow h:
          entry: planner
          interaction: llm
          planner -> done
    """, {"planner": {"*": {"attempts": [{"ask_user": "Which branch?"}, {"text": "release"},
                                         {"output": {"branch": "release"}}]}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["planner"] == {"branch": "release"}
    calls = [e.payload["model"] for e in events(store, r.run_id, "backend_call")]
    assert calls == ["m-plan", "m-answer", "m-plan"]
    assert not events(store, r.run_id, "ask_user_requested")


def test_llm_or_human_escalates_to_a_person(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema plan:
          branch: string

        agent planner:
          model: "m-plan"
          interaction: llm_or_human
          output: plan
          user: "plan"

        workflow h:
          entry: planner
          planner -> done
    """, {"planner": {"*": {"attempts": [{"ask_user": "Which branch?"}, {"ask_user": "I cannot tell"},
                                         {"output": {"branch": "main"}}]}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    assert events(store, r.run_id, "ask_user_requested")
