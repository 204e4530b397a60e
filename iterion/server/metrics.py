"""``GET /metrics`` of ``iterion server``: the store's runs in the Prometheus text format.

Runs execute in worker processes (iterion/server/worker.py), runners, or CLIs sharing the store,
so nothing is counted in this process as it happens: every scrape reads the store. Run counts by
status are read whole each time (the run list, without validating documents); node durations,
LLM tokens and cost are counted from the runs' timelines, incrementally: the collector remembers
how far it read each run (the event ``seq``) and reads only what was appended since, so a scrape
costs the new events plus one list of the runs. Counters start from the events a server first
sees (its first scrape counts the whole store's history once), as Prometheus counters restart
with a process.

Labels stay bounded: a node duration is labelled by workflow and node (the workflows' own
names), tokens and cost by backend and model.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from iterion.store import events as ev
from iterion.store.status import RunStatus

if TYPE_CHECKING:
    from iterion.store import Store

# seconds: a compute step is milliseconds, an agent node minutes, a human gate hours
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class StoreMetrics:
    """The registry /metrics exposes, brought up to date from the store at each scrape."""

    def __init__(self, store: Store, queue: Any = None) -> None:
        self.store, self.queue = store, queue
        self.registry = CollectorRegistry(auto_describe=True)
        self.runs = Gauge("iterion_runs", "Runs in the store, by status.", ["status"], registry=self.registry)
        self.nodes = Histogram("iterion_node_duration_seconds", "Node executions (node_started to "
                               "node_finished/node_failed), by workflow, node and outcome.",
                               ["workflow", "node", "outcome"], buckets=DURATION_BUCKETS, registry=self.registry)
        self.tokens = Counter("iterion_llm_tokens", "LLM tokens charged, by backend, model and type "
                              "(input or output).", ["backend", "model", "type"], registry=self.registry)
        self.cost = Counter("iterion_llm_cost_usd", "LLM cost charged in USD, by backend and model.",
                            ["backend", "model"], registry=self.registry)
        self.calls = Counter("iterion_llm_calls", "LLM calls (turns) charged, by backend and model.",
                             ["backend", "model"], registry=self.registry)
        self.queue_depth = Gauge("iterion_queue_depth", "Deliveries of the work queue, by state "
                                 "(pending, in_flight, dead_lettered); only with a queue.", ["state"],
                                 registry=self.registry) if queue is not None else None
        self.read_to: dict[str, int] = {}  # run id -> the last event seq counted
        self.done: set[str] = set()  # ended runs whose timeline was read to its end
        self.open: dict[tuple[str, str, int], float] = {}  # (run, node, iteration) -> its start (epoch s)
        self.lock = threading.Lock()  # scrapes may overlap

    def scrape(self) -> bytes:
        with self.lock:
            self._update()
            return generate_latest(self.registry)

    def _update(self) -> None:
        from iterion.store.docstore import CorruptRun

        counts = {s.value: 0 for s in RunStatus} | {"corrupt": 0}
        for r in self.store.list_summaries():
            if isinstance(r, CorruptRun):
                counts["corrupt"] += 1
                continue
            counts[r.status.value] += 1
            if r.id not in self.done:
                self._read(r.id, r.workflow_name)
                if r.status.is_terminal:
                    self.done.add(r.id)
        for status, n in counts.items():
            self.runs.labels(status).set(n)
        if self.queue_depth is not None:
            try:
                q = self.queue.status()
            except Exception:  # noqa: BLE001 - an unreachable queue: the other metrics still answer
                return
            for state in ("pending", "in_flight", "dead_lettered"):
                self.queue_depth.labels(state).set(int(q.get(state) or 0))

    def _read(self, run_id: str, workflow: str) -> None:
        after = self.read_to.get(run_id, 0)
        try:
            new = self.store.read_events(run_id, after_seq=after)
        except Exception:  # noqa: BLE001 - an unreadable timeline is reported where it is read in detail
            return
        for e in new:
            after = max(after, e.seq)
            if e.node is not None and e.type == ev.NODE_STARTED:
                self.open[(run_id, e.node, e.iteration or 0)] = e.time.timestamp()
            elif e.node is not None and e.type in (ev.NODE_FINISHED, ev.NODE_FAILED):
                started = self.open.pop((run_id, e.node, e.iteration or 0), None)
                if started is not None:
                    outcome = "finished" if e.type == ev.NODE_FINISHED else "failed"
                    self.nodes.labels(workflow, e.node, outcome).observe(max(0.0, e.time.timestamp() - started))
            elif e.type == ev.BACKEND_CALL:
                p = ev.payload(e, ev.BackendCallPayload)
                backend, model = str(p.get("backend") or ""), str(p.get("model") or "")
                if "input_tokens" in p:
                    self.tokens.labels(backend, model, "input").inc(max(0, int(p.get("input_tokens") or 0)))
                    self.tokens.labels(backend, model, "output").inc(max(0, int(p.get("output_tokens") or 0)))
                else:  # an event of an older iterion: the total only
                    self.tokens.labels(backend, model, "total").inc(max(0, int(p.get("tokens") or 0)))
                self.cost.labels(backend, model).inc(max(0.0, float(p.get("cost_usd") or 0.0)))
                self.calls.labels(backend, model).inc()
        self.read_to[run_id] = after
