"""Run start-up of a 5,000-node chain against a same-size ordinary workflow (issue 28).

Start-up is everything from `launch_run` to the first `node_started` event: compile and
validate (fan-out convergence included), the run's creation, versioning, and the engine's
per-run tables (nodes on cycles, edge indexes). It must be linear in nodes + edges: the
chain was cubic (it never ran its first node in 300 s). Prints the best time of each, the
ratio, time per node and the peak Python memory (tracemalloc, a separate pass).

    .venv/bin/python bench/bench_startup.py             # 5,000 nodes, best of 3
    .venv/bin/python bench/bench_startup.py --nodes 1000 --repeat 1
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iterion.dsl import load_workflow  # noqa: E402
from iterion.engine.cancel import CancelToken  # noqa: E402
from iterion.engine.launch import LaunchOptions, launch_run  # noqa: E402
from iterion.store import Event, Store  # noqa: E402


def chain(nodes: int) -> str:
    decls = [f'tool n{i}:\n  command: "true"\n' for i in range(nodes)]
    edges = [f"  n{i} -> n{i + 1}" for i in range(nodes - 1)] + [f"  n{nodes - 1} -> done"]
    return "\n".join(decls) + "\nworkflow chain:\n  entry: n0\n" + "\n".join(edges) + "\n"


def ordinary(nodes: int) -> str:
    """Stages of 6 nodes: a fan-out of two tools converging on a compute, a judge-like compute
    looping back to the stage's start, then on to the next stage."""
    decls = ["schema ok:\n  ok: bool\n"]
    edges: list[str] = []
    stages = max(1, nodes // 6)
    for i in range(stages):
        s = f"s{i}"
        decls += [f"router {s}_split:\n  mode: fan_out_all\n",
                  f'tool {s}_lint:\n  command: "true"\n', f'tool {s}_test:\n  command: "true"\n',
                  f'compute {s}_work:\n  expr:\n    n: "{i} + 1"\n',
                  f'compute {s}_check:\n  output: ok\n  expr:\n    ok: "true"\n',
                  f'tool {s}_note:\n  command: "true"\n']
        nxt = f"s{i + 1}_split" if i + 1 < stages else "done"
        edges += [f"  {s}_split -> {s}_lint", f"  {s}_split -> {s}_test", f"  {s}_lint -> {s}_work",
                  f"  {s}_test -> {s}_work", f"  {s}_work -> {s}_check",
                  f"  {s}_check -> {s}_split when not ok as {s}_again(2)",
                  f"  {s}_check -> {s}_note", f"  {s}_note -> {nxt}"]
    return "\n".join(decls) + "\nworkflow ordinary:\n  entry: s0_split\n" + "\n".join(edges) + "\n"


def start_up(bot: Path, root: Path) -> float:
    """Seconds from launch_run to the first node_started (the run is then cancelled)."""
    ws = Path(tempfile.mkdtemp(dir=root))
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    store = Store(Path(tempfile.mkdtemp(dir=root)))
    token = CancelToken()
    first: list[float] = []

    def listen(event: Event) -> None:
        if event.type == "node_started" and not first:
            first.append(time.perf_counter())
            token.cancel("bench: start-up measured")

    t0 = time.perf_counter()
    launch_run(store, bot, LaunchOptions(workspace=ws, watch=False), token=token, listener=listen)
    assert first, "the run never started its first node"
    return first[0] - t0


def best(n: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(n))


def peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = {}
        for name, text in (("chain", chain(args.nodes)), ("ordinary", ordinary(args.nodes))):
            bot = root / f"{name}.bot"
            bot.write_text(text)
            wf = load_workflow(bot, env={}).workflow
            assert wf is not None, name
            compile_s = best(args.repeat, lambda b=bot: _timed(lambda: load_workflow(b, env={})))
            start_s = best(args.repeat, lambda b=bot: start_up(b, root))
            mem = peak(lambda b=bot: start_up(b, root))
            results[name] = (len(wf.nodes), len(wf.edges), len(text.encode()), compile_s, start_s, mem)
            print(f"{name:>9}: {len(wf.nodes):>6} nodes {len(wf.edges):>6} edges {len(text.encode()) / 1e6:5.2f} MB  "
                  f"compile {compile_s * 1000:7.1f} ms  start-up {start_s * 1000:7.1f} ms "
                  f"({start_s / len(wf.nodes) * 1e6:5.1f} us/node, {start_s / (len(text.encode()) / 1e6):5.2f} s/MB)  "
                  f"peak {mem / 1e6:6.1f} MB")
        ratio = results["chain"][4] / results["ordinary"][4]
        print(f"chain / ordinary start-up: {ratio:.2f}x (target: under 2x)")


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
