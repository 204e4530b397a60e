"""`GET /metrics` of `iterion server --nats URL`: the work queue's depth, from the queue itself."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_checkout
from tests.queue.conftest import Cluster, make_forge
from tests.queue.test_server_queue import GATE, _remote
from tests.server.conftest import start_server


def _gauges(text: str, name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == name}


def test_queue_depth_counts_a_pending_delivery(cluster: Cluster, tmp_path: Path) -> None:
    forge = make_forge(tmp_path / "forge", {"flows/gate.bot": GATE})
    server = start_server(make_checkout(cluster.root / "project-metrics"), "--nats", cluster.nats.url,
                          env={"ITERION_NATS_PREFIX": cluster.prefix})
    try:
        c = server.client()
        before = c.get("/metrics").text
        assert _gauges(before, "iterion_queue_depth", "state") == {"pending": 0, "in_flight": 0, "dead_lettered": 0}
        launched = _remote(server, "runs", "launch", "--repo", str(forge), "--ref", "main", "--file", "flows/gate.bot")
        assert launched.returncode == 0, launched.stderr
        after = c.get("/metrics").text  # no runner: the delivery waits
        assert _gauges(after, "iterion_queue_depth", "state") == {"pending": 1, "in_flight": 0, "dead_lettered": 0}
        assert _gauges(after, "iterion_runs", "status")["queued"] == 1
    finally:
        server.stop()
