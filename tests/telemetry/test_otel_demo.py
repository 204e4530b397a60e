"""OpenTelemetry traces of a real demo run (script backend): a run is one trace whose id is the
run id, the launch and the resume each a run span, every node a span under its run span, every
LLM turn a GenAI span under its node's; off unless asked for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import iterion
from iterion.telemetry import otel_enabled
from tests.conftest import REPO_ROOT
from tests.telemetry.capture import by_name, span_exporter


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "demo"
    shutil.copytree(REPO_ROOT / "fixtures" / "demo", work)
    monkeypatch.chdir(work)
    monkeypatch.delenv("ITERION_NATS_URL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    return work


def test_the_switches() -> None:
    assert not otel_enabled({})
    assert otel_enabled({"ITERION_OTEL": "1"}) and otel_enabled({"ITERION_OTEL": "true"})
    assert otel_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not otel_enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "ITERION_OTEL": "0"})


def test_a_demo_run_and_its_resume_are_one_trace(demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = span_exporter()
    monkeypatch.setenv("ITERION_OTEL", "1")
    store = tmp_path / "store"
    r = iterion.run(demo / "demo.bot", workspace=demo, store=store)
    assert r.status == "paused_waiting_human"
    done = iterion.resume(r.id, answers={"approved": True, "note": "ok"}, store=store)
    assert done.status == "finished"
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans} == {int(r.id, 16)}  # the run id is the trace id

    runs = by_name(spans, "iterion.run")
    assert [s.name for s in runs] == ["iterion.run demo", "iterion.run demo"]
    launch, resumed = sorted(runs, key=lambda s: s.start_time or 0)
    assert launch.attributes["iterion.run.status"] == "paused" and not launch.attributes["iterion.run.resumed"]
    assert resumed.attributes["iterion.run.status"] == "finished" and resumed.attributes["iterion.run.resumed"]
    assert launch.parent is not None and launch.parent == resumed.parent  # one synthetic root per run
    run_span_ids = {launch.context.span_id, resumed.context.span_id}

    nodes = by_name(spans, "iterion.node ")
    assert all(n.parent is not None and n.parent.span_id in run_span_ids for n in nodes)
    names = [n.attributes["iterion.node.id"] for n in sorted(nodes, key=lambda s: s.start_time or 0)]
    assert names[:5] == ["gather", "plan", "write", "review", "write"]  # the review loop: write twice
    assert {"checks", "save_draft", "stamp", "collect", "approve", "publish"} <= set(names)
    approve = [n for n in nodes if n.attributes["iterion.node.id"] == "approve"]
    assert approve[0].attributes.get("iterion.node.stopped") == "paused"  # parked on the person

    turns = by_name(spans, "chat ")
    assert len(turns) == 4  # write, review, write, review
    node_ids = {n.context.span_id: n.attributes["iterion.node.id"] for n in nodes}
    for t in turns:
        a = t.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.system"] == "script"
        assert a["gen_ai.request.model"] in ("demo-writer", "demo-reviewer")
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["iterion.cost_usd"] >= 0
        assert t.parent is not None and node_ids[t.parent.span_id] == a["iterion.node.id"]
        assert (t.start_time or 0) <= (t.end_time or 0)
    assert sum(t.attributes["gen_ai.usage.input_tokens"] + t.attributes["gen_ai.usage.output_tokens"]
               for t in turns) == done.tokens  # the spans' tokens are the run's


def test_without_the_switch_no_span_is_made(demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = span_exporter()
    monkeypatch.delenv("ITERION_OTEL", raising=False)
    iterion.run(demo / "demo.bot", workspace=demo, store=tmp_path / "store")
    assert exporter.get_finished_spans() == ()
