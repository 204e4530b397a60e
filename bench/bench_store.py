"""Run-store write paths vs the bare durable write they are built on, measured in the same run.

    .venv/bin/python bench/bench_store.py            # 2,000 events, 500 run saves
    .venv/bin/python bench/bench_store.py --quick    # 200 events, 50 run saves

* event append (flock + tail check + write + fsync) vs a bare ``write + fsync`` of the same line
  to an O_APPEND file: the price of cross-process seq continuity and torn-tail repair.
* ``save_run`` (flock + read/compare version + atomic write) vs ``gitrefs.persist.write_model`` of the
  same document: the price of compare-and-swap.
* first append of a fresh appender on a long log (tail read) vs a warm append: the cost a
  resuming process pays once.

Ratios are ours / baseline (1.0 = no overhead). Interleaved rounds so disk drift hits both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iterion.store import EventLog, RunDoc, Store, new_id  # noqa: E402
from iterion.store import events as ev  # noqa: E402
from gitrefs.persist import write_model  # noqa: E402


def per_op(fn: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def interleave(ours: Callable[[], object], base: Callable[[], object], n: int, rounds: int = 5) -> tuple[float, float]:
    a, b = [], []
    per_op(ours, 5)  # warm-up, not counted (first-open costs, page cache)
    per_op(base, 5)
    for _ in range(rounds):
        a.append(per_op(ours, n // rounds))
        b.append(per_op(base, n // rounds))
    return statistics.median(a), statistics.median(b)


def report(name: str, ours: float, base: float) -> None:
    print(f"{name:<34} ours {ours * 1e6:9.1f} us/op   baseline {base * 1e6:9.1f} us/op   ratio {ours / base:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for CI smoke runs")
    args = parser.parse_args()
    n_events, n_saves = (200, 50) if args.quick else (2000, 500)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = Store(root / ".iterion")
        doc = store.create_run(RunDoc(id=new_id(), name="bench-a-b", workflow_name="bench",
                                      workflow_source="x" * 4000, vars={"k": "v" * 200}))
        log = store.events(doc.id)
        payload = {"node": "n", "detail": "y" * 200}
        line = (ev.Event(seq=1, time=doc.created_at, type=ev.NODE_FINISHED, node="n", payload=payload)
                .model_dump_json() + "\n").encode()
        raw_path = root / "raw.jsonl"
        raw_fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def raw_append() -> None:
            os.write(raw_fd, line)
            os.fsync(raw_fd)

        ours, base = interleave(lambda: log.append(ev.NODE_FINISHED, node="n", payload=payload), raw_append, n_events)
        report("event append", ours, base)
        os.close(raw_fd)

        plain = root / "plain.json"

        def cas_save() -> None:
            store.save_run(doc, doc.version)

        ours, base = interleave(cas_save, lambda: write_model(plain, doc), n_saves)
        report("save_run (CAS) vs write_model", ours, base)

        run_dir = store.run_dir(doc.id)
        size = store.paths(doc.id).events_jsonl.stat().st_size
        cold, warm = [], []
        for _ in range(20):
            fresh = EventLog(run_dir)
            t0 = time.perf_counter()
            fresh.append(ev.WARNING)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fresh.append(ev.WARNING)
            warm.append(time.perf_counter() - t0)
        report(f"first append on {size // 1024} KiB log", statistics.median(cold), statistics.median(warm))


if __name__ == "__main__":
    main()
