"""The worktree boundary WITHOUT the watcher, 100 changed files, against `git add -A` on a warm
index (issue 13), with a breakdown of where our time goes: every git subprocess (wall time) and
the Python between them.

    .venv/bin/python bench/bench_wt_boundary.py [--files 100000] [--rounds 9] [--tree DIR]

``--tree DIR`` keeps the built tree in DIR (built there if missing, reused otherwise: a 100,000
file tree takes a minute to build). Rounds are interleaved: per round, 100 files are changed once
for our boundary and once more for the baseline, each measured on its own edit, as bench_scale does.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench_scale as bs  # noqa: E402

import gitrefs.gitcli as gitcli  # noqa: E402
from iterion.engine.versioning import open_versioning  # noqa: E402

TIMES: list[tuple[str, float]] = []  # (git subcommand, wall seconds) of the current boundary


def _sub(args: list[str]) -> str:
    rest = args[3:]  # "git", "-C", dir
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        i += 2 if rest[i] == "-c" else 1
    return rest[i] if i < len(rest) else "?"


class _Timed:
    """subprocess as gitcli uses it, recording each git command's wall time."""

    PIPE = subprocess.PIPE
    DEVNULL = subprocess.DEVNULL
    CompletedProcess = subprocess.CompletedProcess

    @staticmethod
    def run(args: list[str], **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return subprocess.run(args, **kw)
        finally:
            TIMES.append((_sub(args), time.perf_counter() - t0))

    class Popen(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: list[str], **kw: Any) -> None:
            self._t0 = time.perf_counter()
            self._name = _sub(args)
            super().__init__(args, **kw)

        def communicate(self, *a: Any, **kw: Any) -> Any:
            try:
                return super().communicate(*a, **kw)
            finally:
                TIMES.append((self._name + " (async)", time.perf_counter() - self._t0))


gitcli.subprocess = _Timed  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--tree", type=Path, help="keep (or reuse) the built tree here")
    ap.add_argument("--trace", type=Path, help="GIT_TRACE2_PERF of our git commands, one file per round, here")
    ap.add_argument("--profile", action="store_true", help="then profile one more boundary (cProfile, top 30)")
    args = ap.parse_args()
    tmp = None
    if args.tree is None:
        tmp = tempfile.mkdtemp(prefix="bench-wt-")
        base = Path(tmp)
    else:
        base = args.tree
        base.mkdir(parents=True, exist_ok=True)
    try:
        run(base, args.files, args.rounds, args.profile, args.trace)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def run(base: Path, n: int, rounds: int, profile: bool = False, trace: Path | None = None) -> None:
    ws = base / "ws"
    if not (ws / ".git").is_dir():
        t0 = time.perf_counter()
        bs.build_tree(ws, n)
        print(f"[{n} files: tree built in {time.perf_counter() - t0:.1f}s]", flush=True)
    else:
        bs.git(ws, "reset", "-q", "--hard")  # a reused tree: back to its commit (the index warm)
        bs.git(ws, "update-index", "--refresh")
    time.sleep(bs.SETTLE)
    changer = bs.Changer(ws, n)
    changer.next = int(time.time()) % 1000  # a reused tree: other files than last time
    stamp = time.strftime("%H%M%S")
    run_id = f"wtb{stamp}"
    v = open_versioning(worktree=True, workspace=ws, run_dir=base / "runs" / run_id, run_id=run_id,
                        start=True, watch=False)
    seq = [0]

    def lbl(kind: str = "nodes") -> bs.BoundaryLabel:
        seq[0] += 1
        return bs.BoundaryLabel.parse(f"{kind}:n{seq[0]}:0")

    t0 = time.perf_counter()
    v.mark(lbl("pre"))
    v.mark(lbl())  # the cold one (re-seed)
    print(f"[cold boundary {1000 * (time.perf_counter() - t0):.0f} ms]", flush=True)
    objs = base / f"baseline-objects-{stamp}"
    (objs / "info").mkdir(parents=True)
    warm_index = base / f"warm-{stamp}.index"
    shutil.copy2(ws / ".git" / "index", warm_index)
    warm_env = {**bs.GIT_ENV, "GIT_INDEX_FILE": str(warm_index), "GIT_OBJECT_DIRECTORY": str(objs)}
    bs.git(ws, "add", "-A", env=warm_env)
    ours: list[float] = []
    add: list[float] = []
    per_git: dict[str, list[float]] = collections.defaultdict(list)
    py: list[float] = []
    for r in range(rounds):
        changer.change(100)
        TIMES.clear()
        if trace:
            trace.mkdir(parents=True, exist_ok=True)
            os.environ["GIT_TRACE2_PERF"] = str(trace / f"round{r + 1}")
        t = bs.timed(lambda: v.mark(lbl()))
        os.environ.pop("GIT_TRACE2_PERF", None)
        ours.append(t)
        counts = collections.Counter(name for name, _ in TIMES)
        for name, s in TIMES:
            per_git[name].append(s)
        # async git runs while Python works: only the synchronous ones are subtracted
        py.append(t - sum(s for name, s in TIMES if not name.endswith("(async)")))
        changer.change(100)
        add.append(bs.timed(lambda: bs.git(ws, "add", "-A", env=warm_env)))
        print(f"round {r + 1}: ours {ours[-1] * 1000:6.1f} ms  git add -A {add[-1] * 1000:6.1f} ms  "
              f"git: {', '.join(f'{k} x{c}' for k, c in sorted(counts.items()))}", flush=True)
    if profile:
        import cProfile
        import pstats

        changer.change(100)
        prof = cProfile.Profile()
        prof.runcall(lambda: v.mark(lbl()))
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    v.close()
    m_ours, m_add = bs.med(ours) * 1000, bs.med(add) * 1000
    per_round = bs.med([a / b for a, b in zip(ours, add, strict=True)])
    print(f"\nmedian of {rounds}: ours {m_ours:.1f} ms, git add -A (warm) {m_add:.1f} ms, "
          f"ratio {m_ours / m_add:.2f} (median of the per-round ratios {per_round:.2f})")
    print("breakdown (median per boundary):")
    for name, xs in sorted(per_git.items()):
        print(f"  git {name:24s} {bs.med(xs) * 1000:7.1f} ms  (x{len(xs) / rounds:.0f})")
    print(f"  python outside sync git      {bs.med(py) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
