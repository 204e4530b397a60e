"""Benchmark: the cold first boundary and store bytes per run, with and without git reuse
(workspacetrack/gitsource.py), beside `git status` and `git add -A` into an empty index timed in
the same run on the same tree.

    .venv/bin/python bench/bench_git_reuse.py --sizes 10000,100000
    .venv/bin/python bench/bench_git_reuse.py --quick          # 2,000 files

"before": content ids by blake3 (ITERION_TRACK_GIT_REUSE=0), every file read and copied; each
run with its own object store, as before objects were shared per iterion store.
"after": git blob ids, the index vouching for unchanged files; objects shared by all runs of
the store. Each cold boundary is a fresh Tracker on a fresh run (no stat cache), the file
cache warm (the same for git's figures).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitrefs.boundary import BoundaryLabel
from workspacetrack import Tracker
from workspacetrack.gitsource import REUSE_ENV
from workspacetrack.walk import RACY_WINDOW_NS

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x", "GIT_CONFIG_NOSYSTEM": "1"}


def build_tree(root: Path, n: int) -> None:
    """Deterministic: n tracked files in directories of 50, plus ignored build output."""
    rnd = random.Random(13)
    for i in range(n):
        d = root / f"pkg{i // 500}" / f"mod{(i // 50) % 10}"
        if i % 50 == 0:
            d.mkdir(parents=True, exist_ok=True)
        body = bytes(rnd.getrandbits(8) % 26 + 97 for _ in range(rnd.randint(50, 2000)))
        (d / f"file{i}.py").write_bytes(b"# generated\n" + body)
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    for i in range(max(10, n // 100)):
        (root / "build" / f"out{i}.o").write_bytes(b"\0" * 1000)
        (root / f"run{i}.log").write_text("log\n")


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(["git", *args], cwd=cwd, env=env or GIT_ENV, check=True, capture_output=True)
    return time.perf_counter() - t0


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _d, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


def cold_boundary(store: Path, ws: Path, run: str) -> float:
    track = store / "runs" / run / "track"  # the engine's layout: objects shared at <store>/objects
    t0 = time.perf_counter()
    t = Tracker(track, ws, run)
    t.capture(BoundaryLabel.parse("nodes:n:0"))
    return time.perf_counter() - t0


def measure(n: int, reps: int) -> dict[str, float]:
    base = Path(tempfile.mkdtemp(prefix=f"bench-reuse-{n}-"))
    try:
        ws = base / "ws"
        ws.mkdir()
        git(ws, "init", "-q", "-b", "main")
        build_tree(ws, n)
        empty_index = base / "empty-index"
        add_times = []
        for _ in range(reps):
            empty_index.unlink(missing_ok=True)
            add_times.append(git(ws, "add", "-A", env={**GIT_ENV, "GIT_INDEX_FILE": str(empty_index)}))
        git(ws, "add", "-A")
        git(ws, "commit", "-q", "-m", "tree")
        time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)  # out of the racy windows (git's and ours)
        git(ws, "status", "--porcelain")  # refresh the index stat once, as any user's git would
        time.sleep(1.1)
        status = sorted(git(ws, "status", "--porcelain") for _ in range(reps))[reps // 2]
        out: dict[str, float] = {"git_status": status, "git_add_empty_index": sorted(add_times)[reps // 2]}
        for mode in ("before", "after"):
            os.environ[REUSE_ENV] = "0" if mode == "before" else "1"
            times, sizes = [], []
            shared = base / f"store-{mode}"
            for r in range(reps):
                store = base / f"store-{mode}-{r}" if mode == "before" else shared
                before = tree_bytes(store) if store.exists() else 0
                times.append(cold_boundary(store, ws, f"run{r}"))
                sizes.append(tree_bytes(store) - before)
            out[f"{mode}_cold_s"] = sorted(times)[reps // 2]
            out[f"{mode}_store_run1"] = sizes[0]
            out[f"{mode}_store_run2"] = sizes[1] if len(sizes) > 1 else float("nan")
        os.environ.pop(REUSE_ENV, None)
        return out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    sizes = [2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        r = measure(n, max(2, args.reps))
        print(f"== {n} files ==")
        print(f"git status                      {r['git_status'] * 1000:8.0f} ms")
        print(f"git add -A into an empty index  {r['git_add_empty_index'] * 1000:8.0f} ms")
        for mode in ("before", "after"):
            cold = r[f"{mode}_cold_s"]
            print(f"{mode:6} cold first boundary       {cold * 1000:8.0f} ms"
                  f"  ({cold / r['git_status']:.1f}x git status, {cold / r['git_add_empty_index']:.2f}x git add -A)")
            print(f"{mode:6} store bytes run 1 / run 2  {mb(r[f'{mode}_store_run1'])} / {mb(r[f'{mode}_store_run2'])}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
