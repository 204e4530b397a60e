"""`GET /metrics` of a real `iterion server`: the token is required (Bearer), and after a demo run
launched, answered and finished through the API, the scrape (parsed by prometheus_client's own
text parser) counts the run by status, every node's duration, and the tokens and cost the run's
timeline charged."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import Server, wait_status


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _sum(samples: dict[Any, float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and all((k, w) in ls for k, w in labels.items()))


def test_metrics_after_a_run(server: Server) -> None:
    assert server.client(token="").get("/metrics").status_code == 401
    wrong = server.client(token="wrong-token").get("/metrics")
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"

    c = server.client()
    first = _samples(c.get("/metrics").text)
    assert _sum(first, "iterion_runs") == 0
    run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
    wait_status(c, run_id, {"paused_waiting_human"})
    parked = c.get("/metrics")
    assert parked.status_code == 200 and parked.headers["content-type"].startswith("text/plain")
    mid = _samples(parked.text)
    assert _sum(mid, "iterion_runs", status="paused_waiting_human") == 1
    assert c.post(f"/api/runs/{run_id}/resume", json={"answers": {"approved": True, "note": "ok"}}).status_code == 202
    wait_status(c, run_id, {"finished"})

    m = _samples(c.get("/metrics").text)
    assert _sum(m, "iterion_runs", status="finished") == 1 and _sum(m, "iterion_runs") == 1
    assert "iterion_queue_depth" not in {n for n, _ in m}  # no queue configured
    # node durations: each node of the demo observed (write and review twice: the review loop)
    count = {node: _sum(m, "iterion_node_duration_seconds_count", workflow="demo", node=node, outcome="finished")
             for node in ("gather", "plan", "write", "review", "collect", "approve", "publish")}
    assert count == {"gather": 1, "plan": 1, "write": 2, "review": 2, "collect": 1, "approve": 1, "publish": 1}
    assert _sum(m, "iterion_node_duration_seconds_sum", workflow="demo") >= 0
    # tokens and cost: what the run's own timeline charged, by backend/model and type
    charged = [e for e in (json.loads(line) for line in
                           (server.store / "runs" / run_id / "events.jsonl").read_text().splitlines())
               if e["type"] == "backend_call"]
    assert len(charged) == 4
    for kind in ("input", "output"):
        assert _sum(m, "iterion_llm_tokens_total", backend="script", type=kind) == \
            sum(e["payload"][f"{kind}_tokens"] for e in charged) > 0
    assert abs(_sum(m, "iterion_llm_cost_usd_total", backend="script")
               - sum(e["payload"]["cost_usd"] for e in charged)) < 1e-9
    assert _sum(m, "iterion_llm_calls_total", model="demo-writer") == 2
    # scraping again counts nothing twice
    assert _samples(c.get("/metrics").text) == m
