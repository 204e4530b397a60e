"""Peak memory of loading a workflow, per MB of source; target under 100 MB of RSS per MB.

Each measurement runs in its own subprocess: the workflow is written to a file, the child
imports the front end and loads it (``load_workflow``: what `iterion validate` does) or
compiles it for a run (``compile_source``: load + digest), and the parent reads the child's
peak RSS from ``os.wait4`` (its own RUSAGE_CHILDREN record). Sources are generated in a child
too, so the parent stays small (a forked child's peak counts what it inherited). The baseline is a child that
imported the same modules and read the same file but did not parse it; the figure is
(peak - baseline) / source size. Two shapes: ``stages`` (the realistic generator of
bench_dsl.py) and ``chain`` (the one-line tool nodes of the 250,000-node report), at two sizes
each, so a superlinear structure shows as a per-MB figure that grows with the size.

    .venv/bin/python bench/bench_parse_memory.py            # 1 MB and 4 MB sources
    .venv/bin/python bench/bench_parse_memory.py --quick    # 0.25 MB and 1 MB
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dsl import generate as generate_stages

TARGET_PER_MB = 100.0

CHILD = """
import sys
from pathlib import Path
from iterion.dsl.loader import load_workflow
from iterion.engine.source import compile_source
mode, path = sys.argv[1], Path(sys.argv[2])
data = path.read_bytes()  # the baseline pays for the file's bytes too
if mode == "validate":
    result = load_workflow(path, env={})
    assert result.workflow is not None, [d.format() for d in result.diagnostics[:3]]
elif mode == "run":
    compile_source(path)
"""


def generate_chain(target_bytes: int) -> str:
    """One-line tool nodes chained entry to done: the shape of the 250,000-node report."""
    per_node = len('tool n100000:\n  command: "echo 100000"\n  n100000 -> n100001\n')
    n = max(2, target_bytes // per_node)
    nodes = [f'tool n{i}:\n  command: "echo {i}"\n' for i in range(n)]
    edges = [f"  n{i} -> n{i + 1}\n" for i in range(n - 1)]
    return "".join([*nodes, "workflow chain:\n  entry: n0\n", *edges, f"  n{n - 1} -> done\n"])


def stages_of_size(target_bytes: int) -> str:
    per_line = len(generate_stages(400)) / 400
    return generate_stages(int(target_bytes / per_line))


SHAPES = {"stages": stages_of_size, "chain": generate_chain}


def peak_rss_mb(mode: str, path: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one child loading ``path`` in ``mode``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(path)], env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child {mode} {path} failed with {proc.returncode}")
    return usage.ru_maxrss / 1024, time.perf_counter() - t0  # Linux: kilobytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="0.25 MB and 1 MB sources")
    ap.add_argument("--sizes", type=float, nargs="*", help="source sizes in MB")
    ap.add_argument("--generate", nargs=3, metavar=("SHAPE", "MB", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:  # in a child: the parent stays small, so forking it inflates no child's RSS
        shape, size, out = args.generate
        Path(out).write_text(SHAPES[shape](int(float(size) * 1024 * 1024)))
        return
    sizes = args.sizes or ([0.25, 1.0] if args.quick else [1.0, 4.0])
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-parse-mem-") as tmp:
        for shape in SHAPES:
            per_mb_by_size = []
            for size in sizes:
                path = Path(tmp) / f"{shape}-{size}.bot"
                subprocess.run([sys.executable, __file__, "--generate", shape, str(size), str(path)], check=True)
                mb = path.stat().st_size / (1024 * 1024)
                base, _ = peak_rss_mb("baseline", path)
                for mode in ("validate", "run"):
                    peak, took = peak_rss_mb(mode, path)
                    per_mb = (peak - base) / mb
                    worst = max(worst, per_mb)
                    per_mb_by_size.append((mode, mb, per_mb))
                    print(f"{shape:6} {mode:8} {mb:6.2f} MB source: peak {peak:7.1f} MB, baseline {base:5.1f} MB "
                          f"-> {per_mb:6.1f} MB RSS per MB of source = {per_mb / TARGET_PER_MB:4.2f}x target "
                          f"({took:5.1f} s)")
            for mode in ("validate", "run"):
                rows = [r for r in per_mb_by_size if r[0] == mode]
                if len(rows) >= 2:
                    (_, m0, p0), (_, m1, p1) = rows[0], rows[-1]
                    print(f"{shape:6} {mode:8} growth: {m1 / m0:4.1f}x the source -> {p1 / p0:4.2f}x the RSS per MB "
                          "(1.00 = linear)")
    print(f"worst {worst:.1f} MB RSS per MB of source; target under {TARGET_PER_MB:.0f}: "
          f"{'met' if worst < TARGET_PER_MB else 'MISSED'}")


if __name__ == "__main__":
    main()
