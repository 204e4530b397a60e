"""OpenTelemetry spans of a claw agent run against the scripted chat server: each model turn a
GenAI `chat` span with the server's token counts, each tool call an `execute_tool` span, both
under the agent's node span, under the run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store import RunStatus, Store
from tests.telemetry.capture import by_name, span_exporter

from .conftest import agent_bot, calls, events, final, launch
from .scripted_server import ScriptedLLM


def test_turns_and_tool_calls_are_spans_of_the_agents_node(tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = span_exporter()
    monkeypatch.setenv("ITERION_OTEL", "1")
    (ws / "greet.txt").write_text("helo world\n")
    bot = agent_bot(tmp_path / "src", "openai")
    llm.add({**calls(("read_file", {"path": "greet.txt"}), ("list_dir", {"path": "."})), "usage": {"in": 100, "out": 7}},
            {**calls(("read_file", {"path": "missing.txt"})), "usage": {"in": 150, "out": 5}},
            {**final("read it"), "usage": {"in": 200, "out": 9}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans} == {int(r.run_id, 16)}

    [run] = by_name(spans, "iterion.run")
    assert run.name == "iterion.run w" and run.attributes["iterion.run.status"] == "finished"
    [node] = by_name(spans, "iterion.node coder")
    assert node.parent is not None and node.parent.span_id == run.context.span_id
    assert node.attributes["iterion.node.kind"] == "agent"

    turns = sorted(by_name(spans, "chat "), key=lambda s: s.start_time or 0)
    assert [(t.attributes["gen_ai.usage.input_tokens"], t.attributes["gen_ai.usage.output_tokens"])
            for t in turns] == [(100, 7), (150, 5), (200, 9)]
    for t in turns:
        assert t.name == "chat test-model" and t.attributes["gen_ai.request.model"] == "test-model"
        assert t.attributes["gen_ai.system"] == "claw"
        assert t.parent is not None and t.parent.span_id == node.context.span_id

    tools = sorted(by_name(spans, "execute_tool "), key=lambda s: s.end_time or 0)
    assert [t.attributes["gen_ai.tool.name"] for t in tools] == ["read_file", "list_dir", "read_file"]
    ids = [e.payload["tool_use_id"] for e in events(store, r.run_id, "tool_called")]
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ids
    assert all(t.parent is not None and t.parent.span_id == node.context.span_id for t in tools)
    assert [t.status.is_ok for t in tools] == [True, True, False]  # the missing file: an error status
    # each turn begins after the tool results it read: the spans interleave as the loop ran
    assert (turns[1].start_time or 0) >= (tools[1].end_time or 0)
    assert (node.start_time or 0) <= (turns[0].start_time or 0) and (turns[-1].end_time or 0) <= (node.end_time or 0)
