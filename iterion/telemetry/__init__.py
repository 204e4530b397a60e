"""Telemetry: OpenTelemetry traces of runs, when asked for (docs: README "Telemetry").

On when ``ITERION_OTEL`` is 1/true/yes, or when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the
standard variable: whoever names a collector wants traces), unless ``ITERION_OTEL`` is 0/false/no.
Only then is ``opentelemetry`` imported (the ``iterion[otel]`` extra): this module reads the
environment and nothing else, so a run without telemetry pays one dictionary lookup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iterion.engine.notice import Listener

_ON = {"1", "true", "yes", "on"}
_OFF = {"0", "false", "no", "off"}


def otel_enabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    flag = env.get("ITERION_OTEL", "").strip().lower()
    if flag in _OFF:
        return False
    return flag in _ON or bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())


def with_telemetry(run_id: str, listener: Listener | None) -> Listener | None:
    """``listener``, preceded by the run's OpenTelemetry listener when telemetry is on."""
    if not otel_enabled():
        return listener
    try:
        from iterion.telemetry.otel import run_listener
    except ImportError as exc:
        from iterion.engine.notice import notify

        notify(listener, f"telemetry is on (ITERION_OTEL / OTEL_EXPORTER_OTLP_ENDPOINT) but opentelemetry is "
                         f"missing ({exc.name}): install it with: pip install 'iterion[otel]'")
        return listener
    return run_listener(run_id, listener)
