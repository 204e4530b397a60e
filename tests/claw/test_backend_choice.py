"""Which backend a node runs on when it names none, or names "auto" (docs/language.md §2.4), seen
from the scripted LLM server (real HTTP): the request's wire format and the run's backend_call
events say which backend made the call."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.failure_codes import FailureCode
from iterion.store import RunStatus, Store

from ..conftest import write_bot
from .conftest import events, final, launch
from .scripted_server import ScriptedLLM


def _bot(directory: Path, *, node: str = "", workflow: str = "", model: str = 'model: "test-model"') -> Path:
    lines = ["schema result:", "  summary: string", "", "agent coder:"]
    lines += [f"  {ln}" for ln in (model, node) if ln]
    lines += ['  user: "Say hello."', "  output: result", "", "workflow w:", "  entry: coder"]
    lines += [f"  {workflow}"] if workflow else []
    lines += ["  coder -> done", ""]
    return write_bot(directory, "\n".join(lines))


def _backends(store: Store, run_id: str) -> set[str]:
    return {e.payload["backend"] for e in events(store, run_id, "backend_call")}


@pytest.mark.parametrize(("node", "workflow", "env"), [
    ('backend: "auto"', "", {}),
    ('backend: "AUTO"', 'default_backend: "auto"', {}),
    ("", 'default_backend: "auto"', {}),
    ('backend: "${PICK}"', "", {"PICK": ""}),
    ('backend: "${PICK}"', "", {"PICK": "auto"}),
    ('backend: "${PICK:-auto}"', 'default_backend: "${PICK}"', {}),
], ids=["node-auto", "node-AUTO-workflow-auto", "workflow-auto", "env-empty", "env-auto", "env-unset-default-auto"])
def test_auto_falls_through_to_the_default(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                           monkeypatch: pytest.MonkeyPatch, node: str, workflow: str,
                                           env: dict[str, str]) -> None:
    """Empty or "auto" after expansion is no choice: the endpoints the fixture sets make claw the
    detected backend, and claw (not the openai backend) makes the call."""
    monkeypatch.delenv("PICK", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    llm.add(final("hello"))
    r = launch(store, _bot(tmp_path / "src", node=node, workflow=workflow), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["coder"]["summary"] == "hello"
    assert r.outputs["coder"]["_session_id"].startswith("claw-")  # only claw keeps a claw- session
    assert _backends(store, r.run_id) == {"claw"}
    assert [q["path"] for q in llm.requests] == ["/v1/chat/completions"]


def test_iterion_default_backend_wins_over_detection_and_loses_to_the_source(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_DEFAULT_BACKEND", "openai")
    monkeypatch.setenv("ITERION_BACKEND", "claude_code")  # the older variable comes after it
    llm.add(final("from openai"), final("from claw"))
    r = launch(store, _bot(tmp_path / "a", node='backend: "auto"'), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert _backends(store, r.run_id) == {"openai"}  # detection would have said claw
    assert "_session_id" not in r.outputs["coder"]
    r = launch(store, _bot(tmp_path / "b", workflow="default_backend: claw"), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert _backends(store, r.run_id) == {"claw"}
    assert [q["path"] for q in llm.requests] == ["/v1/chat/completions"] * 2


def test_an_anthropic_credential_alone_sends_an_anthropic_model_to_the_messages_api(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """No backend anywhere and only ANTHROPIC_BASE_URL + key: claw, over the Anthropic format."""
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    llm.add(final("bonjour"))
    r = launch(store, _bot(tmp_path / "src", model='model: "anthropic/claude-test"'), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["coder"]["summary"] == "bonjour"
    (req,) = llm.requests
    assert req["path"] == "/v1/messages"
    assert req["headers"]["x-api-key"] == "sk-test" and req["body"]["model"] == "claude-test"
    assert _backends(store, r.run_id) == {"claw"}


def test_neither_model_nor_backend_runs_on_claw_with_the_default_supervisor_model(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """C018 lets the node through because a credential is detected; at run time claw needs a
    model and takes the default supervisor (the one an llm router without a model gets)."""
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    llm.add(final("ok"))
    r = launch(store, _bot(tmp_path / "src", model=""), ws)
    assert r.status is RunStatus.FINISHED, r.error
    (req,) = llm.requests
    assert req["path"] == "/v1/messages" and req["body"]["model"] == "claude-sonnet-4-6"
    (call,) = events(store, r.run_id, "backend_call")
    assert call.payload["backend"] == "claw" and call.payload["model"] == "anthropic/claude-sonnet-4-6"


def test_an_unknown_backend_fails_the_node_naming_it_its_source_and_the_known_ones(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAM_BACKEND", "gemini")
    r = launch(store, _bot(tmp_path / "src", workflow='default_backend: "${TEAM_BACKEND}"'), ws)
    assert r.status is not RunStatus.FINISHED
    assert r.failure_code == FailureCode.BACKEND_UNAVAILABLE.value
    assert r.error is not None and "\n" not in r.error
    assert "unknown backend 'gemini'" in r.error and "the workflow's default_backend:" in r.error
    assert "known backends: claude_code, claw, codex, openai, script" in r.error
    assert llm.requests == []


def test_the_start_of_run_warnings_use_the_same_order(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An mcp_server is started only by claw nodes: a node naming no backend runs on claw here, so
    the run does not announce the server as unused; told to use openai, it does."""
    src = _bot(tmp_path / "src")
    src.write_text('mcp_server files:\n  transport: stdio\n  command: "true"\n\n' + src.read_text())

    def gaps() -> list[str]:
        return [e.payload["feature"] for e in events(store, r.run_id, "warning")
                if e.payload.get("code") == "feature_not_enforced"]

    llm.add(final("a"), final("b"))
    r = launch(store, src, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert gaps() == []
    monkeypatch.setenv("ITERION_DEFAULT_BACKEND", "openai")
    r = launch(store, src, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert gaps() == ["mcp_server"]
