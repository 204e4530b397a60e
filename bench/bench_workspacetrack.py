"""Benchmark: workspacetrack captures beside a bare walk and git on the same tree, same run.

    .venv/bin/python bench/bench_workspacetrack.py           # 20,000 files
    .venv/bin/python bench/bench_workspacetrack.py --quick   # 2,000 files

Prints each measurement (median of several repetitions) and the ratios the tracker is held to:
an unchanged capture <= 1.5x a bare os.scandir+lstat walk, and a journal-driven capture with
100 changed files < 10% of the stat-walk capture of the same 100 changes.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitrefs.boundary import BoundaryLabel  # noqa: E402
from workspacetrack import Tracker  # noqa: E402
from workspacetrack.walk import RACY_WINDOW_NS  # noqa: E402

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x", "GIT_CONFIG_NOSYSTEM": "1"}
SETTLE = RACY_WINDOW_NS / 1e9 + 0.1  # let fresh writes age out of the racy window before timing


def build_tree(root: Path, n: int) -> list[Path]:
    rnd = random.Random(7)
    files = []
    per_dir = 50
    for i in range(n):
        d = root / f"pkg{i // (per_dir * 10)}" / f"mod{(i // per_dir) % 10}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        p = d / f"file{i}.py"
        p.write_bytes(b"# generated\n" + bytes(rnd.getrandbits(8) % 26 + 97 for _ in range(rnd.randint(50, 400))))
        files.append(p)
    (root / ".gitignore").write_text("*.pyc\n__pycache__/\nbuild/\n")
    return files


def bare_walk(root: str) -> int:
    n = 0
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.name == ".git":
                    continue
                e.stat(follow_symlinks=False)  # the lstat a capture also pays
                n += 1
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    return n


Sample = tuple[float, float]  # (wall seconds, CPU seconds of this process and its git children)


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], object]) -> Sample:
    c0, t0 = _cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _cpu() - c0


def med(samples: list[Sample]) -> Sample:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def median(fn: Callable[[], object], reps: int, before: Callable[[], object] | None = None) -> Sample:
    out = []
    for _ in range(reps):
        if before is not None:
            before()
        out.append(timed(fn))
    return med(out)


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(["git", *args], cwd=root, env=env or GIT_ENV, capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2,000 files and fewer repetitions")
    ap.add_argument("--files", type=int, default=None)
    args = ap.parse_args()
    n = args.files or (2_000 if args.quick else 20_000)
    reps = 3 if args.quick else 5
    work = Path(tempfile.mkdtemp(prefix="bench-track-"))
    try:
        ws, store = work / "ws", work / "store"
        ws.mkdir()
        files = build_tree(ws, n)
        git(ws, "init", "-q")
        git(ws, "add", "-A")
        git(ws, "commit", "-q", "-m", "tree")
        rnd = random.Random(11)
        counter = [0]

        def change_100() -> None:
            for p in rnd.sample(files, 100):
                counter[0] += 1
                p.write_bytes(p.read_bytes() + f"# edit {counter[0]}\n".encode())
            time.sleep(SETTLE)

        time.sleep(SETTLE)
        res: dict[str, Sample] = {}

        def git_add_write_tree(index: Path) -> None:
            env = {**GIT_ENV, "GIT_INDEX_FILE": str(index)}
            git(ws, "add", "-A", env=env)
            git(ws, "write-tree", env=env)

        cold_index = work / "cold.index"
        res["git add -A + write-tree (fresh index)"] = median(lambda: git_add_write_tree(cold_index), min(reps, 3),
                                                              before=lambda: cold_index.unlink(missing_ok=True))
        warm_index = work / "warm.index"
        git_add_write_tree(warm_index)

        t = Tracker(store, ws, "bench")
        seq = [0]

        def capture(tr: Tracker) -> None:
            seq[0] += 1
            tr.capture(BoundaryLabel.parse(f"nodes:n:{seq[0]}"))

        res["capture cold (empty store)"] = timed(lambda: capture(t))

        # The machine this runs on may be shared: measure what is compared in the same rounds,
        # interleaved, so a load spike hits both sides of a ratio alike.
        rounds: dict[str, list[Sample]] = {k: [] for k in (
            "bare scandir+lstat walk", "git status --porcelain", "git add -A + write-tree (warm index)",
            "capture unchanged (warm cache)", "capture unchanged (new process: cache from disk)")}
        for _ in range(reps):
            rounds["bare scandir+lstat walk"].append(timed(lambda: bare_walk(str(ws))))
            rounds["capture unchanged (warm cache)"].append(timed(lambda: capture(t)))
            assert t.last_capture is not None and t.last_capture.hashed == 0, t.last_capture
            rounds["git status --porcelain"].append(timed(lambda: git(ws, "status", "--porcelain")))
            rounds["git add -A + write-tree (warm index)"].append(timed(lambda: git_add_write_tree(warm_index)))
            rounds["capture unchanged (new process: cache from disk)"].append(
                timed(lambda: capture(Tracker(store, ws, "bench"))))

        tj = Tracker(store, ws, "bench-journal")
        tj.start_watching()
        capture(tj)  # the walk that puts the watches in place
        for k in ("capture 100 changed, stat walk", "capture 100 changed, journal",
                  "  scan phase only: 100 changed, stat walk", "  scan phase only: 100 changed, journal",
                  "capture unchanged, journal"):
            rounds[k] = []
        for _ in range(reps):
            change_100()
            rounds["capture 100 changed, stat walk"].append(timed(lambda: capture(t)))
            assert t.last_capture is not None and t.last_capture.mode == "full" and t.last_capture.hashed == 100
            rounds["  scan phase only: 100 changed, stat walk"].append((t.last_capture.seconds, float("nan")))
            rounds["capture 100 changed, journal"].append(timed(lambda: capture(tj)))
            assert tj.last_capture is not None and tj.last_capture.mode == "journal", tj.last_capture
            rounds["  scan phase only: 100 changed, journal"].append((tj.last_capture.seconds, float("nan")))
            rounds["capture unchanged, journal"].append(timed(lambda: capture(tj)))
        tj.stop_watching()
        for k, v in rounds.items():
            res[k] = med(v)

        git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
        print(f"workspacetrack benchmark: {n} files, median of {reps} ({git_version})")
        print("  (wall = elapsed; cpu = this process + git children: on a shared machine cpu is the steadier")
        print("   figure, while only wall includes fsync waits)")
        print(f"  {'':52s} {'wall ms':>10s} {'cpu ms':>10s}")
        for k, (w, c) in res.items():
            print(f"  {k:52s} {w * 1000:10.1f} {c * 1000:10.1f}")

        def ratio(a: str, b: str) -> tuple[float, float]:
            return res[a][0] / res[b][0], res[a][1] / res[b][1]

        bare, walk100 = "bare scandir+lstat walk", "capture 100 changed, stat walk"
        ratios = [
            ("unchanged capture / bare walk (target <= 1.5)", ratio("capture unchanged (warm cache)", bare)),
            ("unchanged capture, new process / bare walk",
             ratio("capture unchanged (new process: cache from disk)", bare)),
            ("journal 100 changed / stat walk 100 changed (target < 0.10)",
             ratio("capture 100 changed, journal", walk100)),
            ("  same, scan phase only (before the durable commit)",
             ratio("  scan phase only: 100 changed, journal", "  scan phase only: 100 changed, stat walk")),
            ("stat walk 100 changed / bare walk", ratio(walk100, bare)),
            ("unchanged capture / git status", ratio("capture unchanged (warm cache)", "git status --porcelain")),
            ("stat walk 100 changed / git status", ratio(walk100, "git status --porcelain")),
            ("journal 100 changed / git status", ratio("capture 100 changed, journal", "git status --porcelain")),
            ("cold capture / git add+write-tree (fresh index)",
             ratio("capture cold (empty store)", "git add -A + write-tree (fresh index)")),
            ("stat walk 100 changed / git add+write-tree (warm index)",
             ratio(walk100, "git add -A + write-tree (warm index)")),
        ]
        print(f"ratios: {'':56s} {'wall':>8s} {'cpu':>8s}")
        for k, (w, c) in ratios:
            print(f"  {k:62s} {w:8.3f} {c:8.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
