"""A resume delivery carries `--model` to the runner; one written before the field decodes without it."""

from __future__ import annotations

import json

from iterion.queue.delivery import Delivery, Kind, decode


def test_model_round_trips_and_older_deliveries_decode() -> None:
    d = Delivery(kind=Kind.RESUME, run_id="r1", request_id="q1", model="openai/gpt-4o", backend="claw")
    back = decode(d.encode())
    assert back.model == "openai/gpt-4o" and back.backend == "claw"
    older = json.loads(d.encode())
    del older["model"]
    assert decode(json.dumps(older).encode()).model is None
