"""claw and the openai backend against a real llama.cpp server running SmolLM2-135M."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from iterion import ir
from iterion.backends import BackendError, BackendRequest
from iterion.backends.openai import OpenAIBackend
from iterion.failure_codes import TABLE, FailureCode, Retry
from iterion.store import RunStatus, Store

from ..claw.conftest import events, launch
from ..conftest import write_bot
from .conftest import MAX_TOKENS, LlamaServer, start_llama

VERDICT = ir.Schema("verdict", (ir.SchemaField("approved", ir.FieldType.BOOL),))


def agent_bot(directory: Path, *, tools: str, kind: str = "agent") -> Path:
    return write_bot(directory, f"""
        schema verdict:
          approved: bool

        {kind} coder:
          backend: claw
          model: "smollm2"
          provider: openai
          user: "Read greet.txt, then say whether it greets the world."
          output: verdict
          max_tokens: {MAX_TOKENS}
          tool_max_steps: 4
          {tools}

        workflow w:
          entry: coder
          coder -> done
        """)


def test_claw_tool_loop_completes_and_the_final_answer_validates(tmp_path: Path, ws: Path, local_model: LlamaServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "greet.txt").write_text("hello world\n")
    monkeypatch.setenv("ITERION_CLAW_FIRST_TOOL", "read_file")  # tool_choice on the first turn
    store = Store(tmp_path / "store")
    r = launch(store, agent_bot(tmp_path / "src", tools="tools: [read_file]"), ws)
    assert r.status is RunStatus.FINISHED, f"{r.failure_code}: {r.error}"
    assert isinstance(r.outputs["coder"]["approved"], bool)  # the JSON-output request held the schema
    called = events(store, r.run_id, "tool_called")
    assert called and called[0].payload["tool"] == "read_file"
    turns = events(store, r.run_id, "backend_call")
    assert len(turns) >= 2 and all(e.payload["tokens"] > 0 for e in turns)  # the 2nd turn was accepted


def test_claw_judge_asks_for_json_and_validates(tmp_path: Path, ws: Path, local_model: LlamaServer) -> None:
    store = Store(tmp_path / "store")
    r = launch(store, agent_bot(tmp_path / "src", tools="", kind="judge"), ws)
    assert r.status is RunStatus.FINISHED, f"{r.failure_code}: {r.error}"
    assert isinstance(r.outputs["coder"]["approved"], bool)


def test_openai_backend_json_output_falls_back_to_the_llama_cpp_form(local_model: LlamaServer) -> None:
    backend = OpenAIBackend({"base_url": local_model.base_url})
    request = BackendRequest(node_id="judge", model="smollm2", user="Is the sky blue? Answer.",
                             output_schema=VERDICT, max_tokens=MAX_TOKENS)
    first = backend.complete(request)
    assert isinstance(first.output, dict) and isinstance(first.output["approved"], bool)
    assert backend.json_mode == "json_object_schema"  # json_schema was refused (HTTP 500) and remembered
    assert first.tokens_out > 0  # llama_cpp.server reports no usage in a stream: the chunks are counted
    assert json.loads(first.text or "") == first.output


def test_a_malformed_request_is_deterministic(local_model: LlamaServer) -> None:
    backend = OpenAIBackend({"base_url": local_model.base_url, "json_mode": "json_schema"})
    with pytest.raises(BackendError) as info:
        backend.complete(BackendRequest(node_id="j", model="smollm2", user="hi", output_schema=VERDICT,
                                        max_tokens=8))
    assert info.value.code is FailureCode.REQUEST_REJECTED and "response_format" in info.value.message
    assert TABLE[info.value.code].retry is Retry.DETERMINISTIC


def test_streaming_shows_progress_from_the_real_server(local_model: LlamaServer) -> None:
    seen: list[tuple[str, dict]] = []
    host = SimpleNamespace(emit=lambda t, p: seen.append((t, p)), check=lambda: None)
    resp = OpenAIBackend({"base_url": local_model.base_url}).complete(BackendRequest(
        node_id="n", model="smollm2", user="Count from one to thirty in words.", max_tokens=MAX_TOKENS, host=host))
    progress = [p for t, p in seen if t == "model_progress"]
    assert progress and progress[-1].get("done") and progress[-1]["tokens_out"] >= 2
    assert progress[-1]["tokens_per_s"] and progress[-1]["tokens_per_s"] > 0
    assert progress[0]["tokens_out"] < progress[-1]["tokens_out"]  # seen while it arrived
    assert resp.tokens_out > 0 and resp.text  # usage from the stream's last chunk


def test_a_server_killed_mid_generation_is_execution_failed_with_the_partial_kept(tmp_path: Path) -> None:
    server = start_llama(tmp_path)  # its own: this test kills it
    seen: list[tuple[str, dict]] = []

    def emit(kind: str, payload: dict) -> None:
        seen.append((kind, payload))
        if kind == "model_progress" and not payload.get("done"):
            server.kill()  # mid-generation: after the first chunk arrived

    host = SimpleNamespace(emit=emit, check=lambda: None)
    try:
        with pytest.raises(BackendError) as info:
            OpenAIBackend({"base_url": server.base_url}).complete(BackendRequest(
                node_id="n", model="smollm2", user="Write a long story about a lighthouse.", max_tokens=400,
                host=host))
    finally:
        server.kill()
    assert info.value.code is FailureCode.EXECUTION_FAILED, info.value.message
    assert TABLE[info.value.code].retry is Retry.TRANSIENT  # a restarted server may answer
    partial = [p for t, p in seen if t == "model_partial"]
    assert len(partial) == 1 and partial[0]["tokens_out"] >= 1 and partial[0]["code"] == "EXECUTION_FAILED"
