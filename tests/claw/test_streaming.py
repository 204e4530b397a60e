"""Streamed answers (SSE) over both wire formats: progress on the timeline, the limit applies to
silence between chunks, an answer cut by a crash is recorded and fails EXECUTION_FAILED."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from .conftest import agent_bot, events, final, launch
from .scripted_server import ScriptedLLM


def test_streamed_answers_show_progress_and_usage(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                 provider: str) -> None:
    llm.add({**final("a long and careful summary of the change"), "usage": {"in": 30, "out": 12}})
    r = launch(store, agent_bot(tmp_path / "src", provider), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["coder"]["summary"] == "a long and careful summary of the change"
    assert llm.requests[0]["body"]["stream"] is True
    if provider == "openai":
        assert llm.requests[0]["body"]["stream_options"] == {"include_usage": True}
    progress = [e.payload for e in events(store, r.run_id, "model_progress")]
    assert progress and progress[-1]["done"] is True and progress[-1]["tokens_out"] > 5
    assert progress[0]["tokens_out"] >= 1 and all(p["seconds"] >= 0 for p in progress)
    assert events(store, r.run_id, "backend_call")[0].payload["tokens"] == 42  # the streamed usage


def test_progress_arrives_while_the_answer_is_generated(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                        provider: str) -> None:
    llm.add({**final("x" * 40), "chunk_delay_s": 0.12})  # ~14 chunks over ~1.7 s
    r = launch(store, agent_bot(tmp_path / "src", provider), ws)
    assert r.status is RunStatus.FINISHED, r.error
    live = [e.payload for e in events(store, r.run_id, "model_progress") if not e.payload.get("done")]
    assert len(live) >= 2 and live[-1]["tokens_out"] > live[0]["tokens_out"]  # seen growing, not only at the end
    assert live[-1]["tokens_per_s"] > 0


def test_an_answer_cut_by_a_crash_is_recorded_and_retried(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                          provider: str) -> None:
    llm.add({**final("the partial answer that never finished"), "cut_after": 6}, final("second try"))
    r = launch(store, agent_bot(tmp_path / "src", provider), ws)
    assert r.status is RunStatus.FINISHED, r.error  # EXECUTION_FAILED is retried in the run
    assert r.outputs["coder"]["summary"] == "second try"
    cut = events(store, r.run_id, "model_partial")
    assert len(cut) == 1 and cut[0].payload["code"] == "EXECUTION_FAILED"
    assert cut[0].payload["text"] and '{"summary": "the partial'.startswith(cut[0].payload["text"][:12])
    assert cut[0].payload["tokens_out"] >= 1
    failed = [e for e in events(store, r.run_id) if e.type in ("node_failed", "node_retry_scheduled")]
    assert failed and failed[0].payload.get("code") == "EXECUTION_FAILED"


def test_the_limit_is_on_silence_not_on_the_whole_answer(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks 0.3 s apart under a 1 s limit: the answer takes longer than the limit and passes."""
    monkeypatch.setenv("ITERION_OPENAI_TIMEOUT", "1")
    llm.add({**final("y" * 24), "chunk_delay_s": 0.3})
    r = launch(store, agent_bot(tmp_path / "src", "openai"), ws)
    assert r.status is RunStatus.FINISHED, r.error
    last = events(store, r.run_id, "model_progress")[-1].payload
    assert last["done"] and last["seconds"] > 1.0


def test_a_server_that_ignores_stream_is_read_as_before(tmp_path: Path, ws: Path, store: Store,
                                                        monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    with ScriptedLLM([final("plain")], stream=False) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        r = launch(store, agent_bot(tmp_path / "src", provider), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["coder"]["summary"] == "plain"


def test_the_cli_shows_tokens_and_rate(capsys: pytest.CaptureFixture[str]) -> None:
    from datetime import datetime, timezone

    from cli.progress import Progress
    from iterion.store import Event

    def ev(type_: str, **payload: object) -> Event:
        return Event(seq=1, time=datetime.now(timezone.utc), type=type_, node="coder", iteration=0, payload=payload)

    plain = Progress(live=False)
    plain(ev("node_started", kind="agent"))
    plain(ev("model_progress", tokens_out=12, seconds=0.5, tokens_per_s=24.0))
    plain(ev("model_progress", tokens_out=30, seconds=1.2, tokens_per_s=25.0, done=True))
    plain(ev("model_partial", text="{\"su", chars=4, tokens_out=3, code="EXECUTION_FAILED", error="broke off"))
    err = capsys.readouterr().err
    assert "coder model 12 tokens · 24 tok/s" in err
    assert "coder model answered, 30 tokens · 25 tok/s" in err
    assert "coder answer cut after 3 tokens (EXECUTION_FAILED)" in err
    live = Progress(live=True)
    live(ev("node_started", kind="agent"))
    live(ev("model_progress", tokens_out=7, seconds=0.3, tokens_per_s=23.3))
    assert "7 tokens · 23.3 tok/s" in capsys.readouterr().err  # on the node's redrawn line


def test_a_tool_call_streamed_as_llama_cpp_does_it() -> None:
    """llama.cpp's server repeats the whole function name in every chunk; OpenAI sends it once."""
    from iterion.backends.sse import OpenAIStream, Progress

    fold = OpenAIStream(Progress(None))
    for piece in ("{", ' "path', '": "a.txt"', "}"):
        fold({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": piece}}]}}]})
    fold({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    call = fold.result()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "read_file", "arguments": '{ "path": "a.txt"}'}
    assert fold.progress.tokens == 4 and fold.finished()
