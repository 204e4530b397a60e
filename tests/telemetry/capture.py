"""The process's OpenTelemetry provider for tests: the SDK exporting to memory, set once (a
process has one global provider; both the demo and the claw tests read spans from it)."""

from __future__ import annotations

import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_lock = threading.Lock()
_exporter: InMemorySpanExporter | None = None


def span_exporter() -> InMemorySpanExporter:
    """The in-memory exporter behind the global provider, emptied."""
    global _exporter
    with _lock:
        if _exporter is None:
            _exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(_exporter))
            trace.set_tracer_provider(provider)
        _exporter.clear()
        return _exporter


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]
