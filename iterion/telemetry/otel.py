"""A run's events as OpenTelemetry spans: the run is a trace, each node a span, each LLM turn
and each agent tool call a span inside its node's.

The trace id is the run id (128 bits of hex), so every process that works on the run (the
launch, each resume, a takeover) adds its spans to one trace; each process's run span hangs under
the same synthetic parent span id derived from the run id. Spans are built from the events the
engine appends (iterion/store/events.py), as they are appended (iterion/engine/execution.py
``make_emit``): ``node_started``/``node_finished``/``node_failed`` open and close node spans,
``backend_call`` is an LLM turn (GenAI semantic conventions: ``gen_ai.system``,
``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``, plus
``iterion.cost_usd``) that began at the node's previous event, ``tool_called`` a tool call that
lasted its ``duration_ms``; ``run_paused``/``run_finished``/``run_failed``/``run_cancelled``
close everything. A telemetry failure never stops a run.

The tracer provider is the process's own when one is set (an application embedding
``iterion.api`` configures OpenTelemetry itself); otherwise one is made here exporting over OTLP
(HTTP/protobuf), configured by the standard ``OTEL_*`` variables, flushed at exit.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from iterion.store import events as ev

if TYPE_CHECKING:
    from iterion.engine.notice import Listener
    from iterion.store import Event

_setup = threading.Lock()
_ENDS = {ev.RUN_PAUSED: "paused", ev.RUN_FINISHED: "finished", ev.RUN_FAILED: "failed",
         ev.RUN_CANCELLED: "cancelled"}


def tracer() -> Tracer:
    """iterion's tracer, from the process's provider (made here, exporting over OTLP, if none is set)."""
    from iterion import __version__

    with _setup:
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import OTELResourceDetector, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            # service.name iterion unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say otherwise
            resource = Resource({"service.name": "iterion", "service.version": __version__}).merge(
                OTELResourceDetector().detect())
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            trace.set_tracer_provider(provider)
    return trace.get_tracer("iterion", __version__)


def trace_id_of(run_id: str) -> int:
    """The run's trace id: the run id itself when it is 32 hex digits, else a digest of it."""
    try:
        value = int(run_id, 16) if len(run_id) == 32 else 0
    except ValueError:
        value = 0
    return value or int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=16).digest(), "big")


def _ns(e: Event) -> int:
    return int(e.time.timestamp() * 1_000_000_000)


class RunSpans:
    """One process's spans of one run, fed the run's events in order (from any thread)."""

    def __init__(self, run_id: str, tracer: Tracer) -> None:
        self.run_id, self.tracer = run_id, tracer
        span_id = int.from_bytes(hashlib.blake2b(run_id.encode(), digest_size=8, person=b"iterion").digest(), "big")
        parent = SpanContext(trace_id=trace_id_of(run_id), span_id=span_id or 1, is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
        self.root = trace.set_span_in_context(NonRecordingSpan(parent))
        self.run: Span | None = None
        self.nodes: dict[tuple[str, int], Span] = {}
        self.last: dict[tuple[str, int], int] = {}  # a node's latest event time: where its next LLM turn began
        self.lock = threading.Lock()

    def __call__(self, e: Event) -> None:
        with self.lock:
            self._on(e)

    def _run_span(self, e: Event) -> Span:
        if self.run is None:
            self.run = self.tracer.start_span("iterion.run", context=self.root, kind=SpanKind.INTERNAL,
                                              start_time=_ns(e), attributes={"iterion.run.id": self.run_id})
        return self.run

    def _on(self, e: Event) -> None:
        run = self._run_span(e)
        p = e.payload
        if e.type in (ev.RUN_STARTED, ev.RUN_RESUMED):
            run.set_attribute("iterion.run.resumed", e.type == ev.RUN_RESUMED)
            for field in ("workflow", "name", "mode"):
                if isinstance(p.get(field), str):
                    run.set_attribute(f"iterion.run.{field}", p[field])
            if isinstance(p.get("workflow"), str):
                run.update_name(f"iterion.run {p['workflow']}")
            return
        if e.type in _ENDS:
            self._close(e, _ENDS[e.type])
            return
        if e.node is None:
            return
        key = (e.node, e.iteration or 0)
        if e.type == ev.NODE_STARTED:
            self.nodes[key] = self.tracer.start_span(
                f"iterion.node {e.node}", context=trace.set_span_in_context(run), start_time=_ns(e),
                attributes={"iterion.node.id": e.node, "iterion.node.iteration": key[1],
                            "iterion.node.kind": str(p.get("kind") or "")})
        elif e.type in (ev.NODE_FINISHED, ev.NODE_FAILED):
            span = self.nodes.pop(key, None)
            if span is not None:
                if e.type == ev.NODE_FAILED:
                    _fail(span, p)
                span.end(end_time=_ns(e))
        elif e.type == ev.BACKEND_CALL:
            self._llm_turn(e, key)
        elif e.type == ev.TOOL_CALLED:
            self._tool_call(e, key)
        self.last[key] = _ns(e)

    def _parent(self, key: tuple[str, int]) -> Any:
        span = self.nodes.get(key) or self.run
        return trace.set_span_in_context(span) if span is not None else self.root

    def _llm_turn(self, e: Event, key: tuple[str, int]) -> None:
        p = e.payload
        end = _ns(e)
        start = self.last.get(key, end)  # the node's start, or the end of its previous turn or tool call
        model = str(p.get("model") or "")
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.system": str(p.get("backend") or ""),
                                 "gen_ai.request.model": model, "iterion.cost_usd": float(p.get("cost_usd") or 0.0),
                                 "iterion.node.id": key[0]}
        if "input_tokens" in p:
            attrs["gen_ai.usage.input_tokens"] = int(p.get("input_tokens") or 0)
            attrs["gen_ai.usage.output_tokens"] = int(p.get("output_tokens") or 0)
        else:  # an event of an older iterion: the total only
            attrs["iterion.tokens"] = int(p.get("tokens") or 0)
        span = self.tracer.start_span(f"chat {model}".strip(), context=self._parent(key), kind=SpanKind.CLIENT,
                                      start_time=min(start, end), attributes=attrs)
        span.end(end_time=end)

    def _tool_call(self, e: Event, key: tuple[str, int]) -> None:
        p = e.payload
        end = _ns(e)
        ms = p.get("duration_ms")
        start = end - int(float(ms) * 1_000_000) if isinstance(ms, (int, float)) else end
        tool = str(p.get("tool") or "")
        span = self.tracer.start_span(
            f"execute_tool {tool}", context=self._parent(key), start_time=start,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                        "gen_ai.tool.call.id": str(p.get("tool_use_id") or ""), "iterion.node.id": key[0]})
        if p.get("error"):
            span.set_status(Status(StatusCode.ERROR, str(p["error"])[:200]))
        span.end(end_time=end)

    def _close(self, e: Event, how: str) -> None:
        end = _ns(e)
        for key, span in list(self.nodes.items()):  # a node parked on a person, or cut by the stop
            span.set_attribute("iterion.node.stopped", how)
            span.end(end_time=end)
            del self.nodes[key]
        assert self.run is not None
        self.run.set_attribute("iterion.run.status", how)
        if how == "failed":
            _fail(self.run, e.payload)
        self.run.end(end_time=end)
        self.run = None  # a later event (a retry in the same process) opens a new run span


def _fail(span: Span, payload: dict[str, Any]) -> None:
    code, error = payload.get("code"), payload.get("error")
    if code:
        span.set_attribute("iterion.failure_code", str(code))
    span.set_status(Status(StatusCode.ERROR, f"{code or ''}: {error or ''}"[:300]))


def run_listener(run_id: str, downstream: Listener | None) -> Listener | None:
    """The run's span builder, then ``downstream``; without opentelemetry installed, ``downstream``
    with one warning saying how to install it."""
    try:
        spans = RunSpans(run_id, tracer())
    except Exception as exc:  # noqa: BLE001 - telemetry must never stop a run
        from iterion.engine.notice import notify

        notify(downstream, f"telemetry is on (ITERION_OTEL / OTEL_EXPORTER_OTLP_ENDPOINT) but could not start: "
                           f"{exc}; install it with: pip install 'iterion[otel]'")
        return downstream

    def listen(e: Event) -> None:
        try:
            spans(e)
        except Exception:  # noqa: BLE001 - telemetry must never stop a run
            pass
        if downstream is not None:
            downstream(e)

    return listen
