"""Cost proportional to what changed (issue 13): every measure at 1,000 / 10,000 / 100,000 files,
beside the git baseline measured in the same run on the same tree.

    .venv/bin/python bench/bench_scale.py                         # 1,000, 10,000 and 100,000 files
    .venv/bin/python bench/bench_scale.py --sizes 10000 --quick   # one size, fewer repetitions

The trees are deterministic (same names, same bytes for a given size) and include ignored files
(``build/`` directories and ``*.log`` files). Per size it prints one row per measure: our figure
(median), the git baseline (median, same run), their ratio, and the goal the issue sets at 100,000
files. Figures are wall-clock milliseconds (store sizes in MB); the machine may be shared, so each
comparison is measured in interleaved rounds.

Measures: cold first boundary of an in-place run (vs ``git status``; ``git add -A`` into an empty
index is printed for reference); store bytes after a first and a second engine run over the
unchanged tree; store growth per finished ``worktree: auto`` run, whose checkout is released
once its commit is recorded (bench/worktree_growth.py; up to 100,000 files); unchanged and 100-changed boundaries in place and in a worktree, each with and
without the watcher (vs ``git status`` / ``git add -A`` on a warm index, writing the changed
files' blobs into an object directory of its own); a rewind restoring 300
files from a fresh tracker, as a new process would (vs ``git checkout HEAD -- <300 files>``); the
first boundary of a new process on the unchanged tree (a new tracker, resuming: the warm start
from the previous process's stat cache and directory fingerprints, vs ``git status``); rewind
planning of 300 files (``rewind --dry-run``'s work, by the product's own functions: one read-only
versioning lent to the pivots' check, the object check and the preview, vs ``git status``); the
per-node cycle at nodes 1-20 and 281-300 of a 300-iteration loop run by the engine (median over repeated runs); a
100-file capture while another process keeps writing without flushing (vs the same capture
unloaded).

Each row also gives the peak resident memory of this process while it was measured (Linux: the
high-water mark is reset before each measure through /proc/self/clear_refs; "-" elsewhere).
Progress goes to stdout as it runs (a 1,000,000-file size takes a long while); every tree and
store lives in one temporary directory, removed at the end, also on an error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gitrefs.boundary import BoundaryLabel  # noqa: E402
from iterion.engine.launch import LaunchOptions, launch_run  # noqa: E402
from iterion.engine.versioning import Versioning, open_versioning  # noqa: E402
from iterion.store import Store  # noqa: E402
from workspacetrack import Tracker  # noqa: E402
from workspacetrack.walk import RACY_WINDOW_NS  # noqa: E402

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@x", "GIT_CONFIG_NOSYSTEM": "1"}
SETTLE = RACY_WINDOW_NS / 1e9 + 0.05  # fresh writes age out of the racy window before a timed capture
PER_DIR = 100

TWO_NODES = """\
schema n:
  v: int

compute a:
  output: n
  expr:
    v: "1"

compute b:
  output: n
  expr:
    v: "2"

workflow twice:
  entry: a
  a -> b
  b -> done
"""

LOOP = """\
schema n:
  again: bool

compute step:
  output: n
  expr:
    again: "true"

workflow spin:
  entry: step
  step -> step when again as spin(299)
  step -> done
"""


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env or GIT_ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def file_path(ws: Path, i: int) -> Path:
    return ws / f"d{i // (PER_DIR * 20):03d}" / f"s{(i // PER_DIR) % 20:02d}" / f"f{i:06d}.txt"


def progress(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f}] {msg}", flush=True)


def peak_reset() -> None:
    """Start a new resident-memory high-water mark for this process (Linux; else nothing)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_mb() -> float | None:
    """This process's resident-memory high-water mark since ``peak_reset``, in MB (None: unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def build_tree(ws: Path, n: int) -> None:
    """``n`` tracked files, 100 per directory, plus ~2% ignored ones; committed (a clean checkout)."""
    ws.mkdir(parents=True)
    for i in range(n):
        if i and i % 100_000 == 0:
            progress(f"tree: {i} files written")
        p = file_path(ws, i)
        if i % PER_DIR == 0:
            p.parent.mkdir(parents=True, exist_ok=True)
            # ignored content: what a capture must skip and a rewind must leave alone
            (p.parent / "build").mkdir()
            (p.parent / "build" / "out.o").write_bytes(b"\0obj" * (64 + i % 97))
            (p.parent / "run.log").write_text(f"log {i}\n")
        p.write_text(f"file {i}\n" + "x" * (i * 7919 % 300) + "\n")
    (ws / ".gitignore").write_text("*.log\nbuild/\n")
    git(ws, "init", "-q", "-b", "main")
    # no `git gc --auto` in the background: after a commit of 100,000 loose objects it detaches
    # and repacks for a minute, during the measures (seen: a 72 s tree build, moved baselines);
    # packed here instead, as a repository people work in is
    git(ws, "config", "gc.auto", "0")
    progress("tree: git add, commit, gc")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "tree")
    git(ws, "gc", "-q")
    # the build's writes and the repack's 100,000 unlinks are flushed before anything is timed:
    # left to writeback, they slowed every file creation of the first measures (ours and git's)
    os.sync()


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def du(path: Path) -> int:
    """Bytes allocated under ``path``, each inode counted once (as du(1) counts hard links)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


@dataclass
class Row:
    measure: str
    ours: float
    base: float | None
    base_name: str
    goal: str
    unit: str = "ms"
    peak: float | None = None  # peak resident MB of this process during the measure

    @property
    def ratio(self) -> float | None:
        return None if self.base in (None, 0) else self.ours / self.base  # type: ignore[operator]


class Changer:
    """Deterministic edits: each call rewrites the next ``k`` tracked files (appends a line)."""

    def __init__(self, ws: Path, n: int) -> None:
        self.ws, self.n, self.next, self.round = ws, n, 0, 0

    def change(self, k: int) -> list[Path]:
        self.round += 1
        out = []
        step = max(1, self.n // k)
        for j in range(k):
            p = file_path(self.ws, (self.next + j * step) % self.n)
            with open(p, "a") as f:
                f.write(f"edit {self.round}\n")
            out.append(p)
        self.next += 1
        time.sleep(SETTLE)
        return out


def measure_size(n: int, reps: int, base: Path) -> list[Row]:
    ws = base / "ws"
    t0 = time.perf_counter()
    build_tree(ws, n)
    print(f"  [{n} files: tree built in {time.perf_counter() - t0:.1f}s]", flush=True)
    time.sleep(SETTLE)
    changer = Changer(ws, n)
    rows: list[Row] = []
    label_seq = [0]
    opened = [0]

    def group(name: str) -> None:
        """A measure starts: progress, and a new memory high-water mark for its rows."""
        done()
        progress(name)
        opened[0] = len(rows)
        peak_reset()

    def done() -> None:
        peak = peak_mb()
        for r in rows[opened[0]:]:
            r.peak = peak
        opened[0] = len(rows)

    def lbl(kind: str = "nodes") -> BoundaryLabel:
        label_seq[0] += 1
        return BoundaryLabel.parse(f"{kind}:n{label_seq[0]}:0")

    status = lambda: git(ws, "status", "--porcelain")  # noqa: E731
    status_s = med([timed(status) for _ in range(reps)])

    # -- cold first boundary ------------------------------------------------------------------
    group("cold first boundary")
    empty_index = base / "empty.index"

    def add_fresh() -> None:
        empty_index.unlink(missing_ok=True)
        git(ws, "add", "-A", env={**GIT_ENV, "GIT_INDEX_FILE": str(empty_index)})

    add_fresh_s = med([timed(add_fresh) for _ in range(min(reps, 2))])
    cold = []
    for r in range(min(reps, 3)):
        tr = Tracker(base / f"cold-store-{r}", ws, f"cold{r}")
        cold.append(timed(lambda: tr.capture(lbl("pre"))))
        tr.close()
        shutil.rmtree(base / f"cold-store-{r}")
    rows.append(Row("cold first boundary, in place", med(cold) * 1000, status_s * 1000, "git status",
                    "<= 2x"))
    rows.append(Row("  (reference) git add -A into an empty index", add_fresh_s * 1000, status_s * 1000,
                    "git status", "-"))

    # -- store bytes after a first and a second run -----------------------------------------
    group("store bytes of two runs")
    src = base / "src"
    src.mkdir()
    (src / "twice.bot").write_text(TWO_NODES)
    store = Store(base / "store")
    before = du(store.root)
    r1 = launch_run(store, src / "twice.bot", LaunchOptions(workspace=ws))
    assert r1.status.value == "finished", r1.error
    after1 = du(store.root)
    r2 = launch_run(store, src / "twice.bot", LaunchOptions(workspace=ws))
    assert r2.status.value == "finished", r2.error
    after2 = du(store.root)
    git_bytes = du(ws / ".git")
    rows.append(Row("store bytes after the first run", (after1 - before) / 1e6, git_bytes / 1e6, ".git size",
                    "-", "MB"))
    rows.append(Row("store growth for a second run (unchanged tree)", (after2 - after1) / 1e6, git_bytes / 1e6,
                    ".git size", "< 1 MB", "MB"))

    # -- store growth per finished worktree run (its checkout is released once committed) ----
    if n <= 100_000:  # two full checkouts per measure: at a million files, minutes of disk only
        group("store growth per finished worktree run")
        from worktree_growth import worktree_growth  # bench/ is sys.path[0]; it imports du from here

        rows.append(Row(*worktree_growth(ws, base)))

    # -- boundaries: in place / worktree, with / without the watcher ------------------------
    group("boundaries in place and in worktrees")
    modes: dict[str, Versioning] = {}
    for name, worktree, watch in (("in place, watcher", False, True), ("in place, walk", False, False),
                                  ("worktree, watcher", True, True), ("worktree, no watcher", True, False)):
        run_id = f"b{len(modes)}"
        v = open_versioning(worktree=worktree, workspace=ws, run_dir=base / "runs" / run_id, run_id=run_id,
                            start=True, watch=watch)
        v.mark(lbl("pre"))  # the cold one (and the walk that puts the watches in place)
        modes[name] = v
    warm_index = base / "warm.index"
    shutil.copy2(ws / ".git" / "index", warm_index)
    # The baseline writes the blobs of the changed files itself, into an object directory of its
    # own: in the repository's it would find those our worktree boundaries just wrote, and skip.
    (base / "baseline-objects" / "info").mkdir(parents=True)
    warm_env = {**GIT_ENV, "GIT_INDEX_FILE": str(warm_index), "GIT_OBJECT_DIRECTORY": str(base / "baseline-objects")}
    git(ws, "add", "-A", env=warm_env)
    unchanged: dict[str, list[float]] = {k: [] for k in modes}
    changed: dict[str, list[float]] = {k: [] for k in modes}
    st_rounds: list[float] = []
    add_rounds: list[float] = []
    for _ in range(reps):
        changer.change(100)
        for k, v in modes.items():
            changed[k].append(timed(lambda v=v: v.mark(lbl())))  # type: ignore[misc]
        add_rounds.append(timed(lambda: git(ws, "add", "-A", env=warm_env)))
        for k, v in modes.items():
            unchanged[k].append(timed(lambda v=v: v.mark(lbl())))  # type: ignore[misc]
        st_rounds.append(timed(status))
    for k in modes:
        rows.append(Row(f"unchanged boundary, {k}", med(unchanged[k]) * 1000, med(st_rounds) * 1000,
                        "git status", "< 10 ms" if k == "worktree, watcher" else "-"))
    for k in modes:
        rows.append(Row(f"boundary with 100 changed, {k}", med(changed[k]) * 1000, med(add_rounds) * 1000,
                        "git add -A (warm index)", "<= 1x"))
    for v in modes.values():
        v.close()

    # -- rewind restoring 300 files, from a fresh tracker (what a new process does) ----------
    # (and first its planning alone, as ``iterion rewind --dry-run`` plans in a new process: one
    # read-only versioning lent to the pivots' check, the object check and the preview)
    group("rewind planning and rewind of 300 files")
    rw_run = base / "rewind-run"  # a run directory: its tracker where the engine keeps an in-place run's
    tr = Tracker(rw_run / "track", ws, "rw")
    tr.capture(lbl("pre"))
    tr.close()
    rewinds, checkouts, plans, plan_status = [], [], [], []
    for r in range(reps):
        tr = Tracker(rw_run / "track", ws, "rw")
        tr.capture(BoundaryLabel.parse(f"nodes:sync{r}:0"))  # the disk as the baseline left it
        pivot = BoundaryLabel.parse(f"pre:rw{r}:0")
        tr.capture(pivot)
        files = changer.change(300)
        tr.capture(BoundaryLabel.parse(f"nodes:rw{r}:0"))
        tr.close()
        plans.append(timed(lambda: plan_dry_run(rw_run, ws, "rw", pivot, 300)))
        plan_status.append(timed(status))
        fresh = Tracker(rw_run / "track", ws, "rw")
        report: list[object] = []
        rewinds.append(timed(lambda: report.append(fresh.restore(pivot))))
        restored = report[0].restored  # type: ignore[attr-defined]
        assert len(restored) == 300, len(restored)
        fresh.close()
        # the baseline: git puts the same 300 files back
        for p in files:
            with open(p, "a") as f:
                f.write("again\n")
        rel = [str(p.relative_to(ws)) for p in files]
        checkouts.append(timed(lambda: git(ws, "checkout", "HEAD", "--", *rel)))
    rows.append(Row("rewind planning (--dry-run), 300 files", med(plans) * 1000, med(plan_status) * 1000,
                    "git status", "<= 1x"))
    rows.append(Row("rewind restoring 300 files (tracker, no CLI)", med(rewinds) * 1000, med(checkouts) * 1000,
                    "git checkout HEAD -- 300 files", "<= 3x"))

    # -- first boundary of a new process (resume), unchanged tree -------------------------------
    group("first boundary of a new process")
    tr = Tracker(rw_run / "track", ws, "rw")  # the previous process: records the tree as it is
    tr.start_watching()
    tr.capture(BoundaryLabel.parse("nodes:settle:0"))
    tr.close()
    time.sleep(SETTLE)
    resumes, st2 = [], []
    for r in range(reps):
        tr = Tracker(rw_run / "track", ws, "rw")
        tr.start_watching()
        resumes.append(timed(lambda: tr.capture(BoundaryLabel.parse(f"resume:rs{r}:0"))))
        tr.close()
        st2.append(timed(status))
    rows.append(Row("first boundary of a new process (resume), unchanged tree", med(resumes) * 1000,
                    med(st2) * 1000, "git status", "<= 1x"))

    # -- per-node cycle of a 300-iteration loop -----------------------------------------------
    group("per-node cycle of a 300-iteration loop")
    # (a cycle is ~3 ms, where a shared machine's jitter is of the same order: the loop runs
    # ``reps`` times and each window's figure is the median over the runs of its median)
    (src / "loop.bot").write_text(LOOP)
    loop_store = Store(base / "loop-store")
    firsts, lasts = [], []
    for _ in range(reps):
        res = launch_run(loop_store, src / "loop.bot", LaunchOptions(workspace=ws))
        assert res.status.value == "finished", res.error
        starts = [e.time for e in loop_store.read_events(res.run_id) if e.type == "node_started"]
        assert len(starts) == 300, len(starts)
        cycles = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
        firsts.append(med(cycles[:20]))
        lasts.append(med(cycles[-19:]))
    first20, last20 = med(firsts), med(lasts)
    rows.append(Row("per-node cycle, nodes 1-20", first20 * 1000, None, "-", "-"))
    rows.append(Row("per-node cycle, nodes 281-300 (base: 1-20)", last20 * 1000, first20 * 1000,
                    "nodes 1-20", "<= 1.2"))

    # -- a 100-file capture while another process writes without flushing ---------------------
    group("100-file capture under a writer")
    tr = Tracker(base / "heavy-store", ws, "heavy")
    tr.start_watching()
    tr.capture(lbl("pre"))
    unloaded = []
    for _ in range(reps):
        changer.change(100)
        unloaded.append(timed(lambda: tr.capture(lbl())))
    heavy = base / "heavy.bin"
    size_mb = 1024 if n >= 100_000 else 512
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(heavy), str(size_mb)], stdout=subprocess.PIPE)
    loaded = []
    try:
        assert writer.stdout is not None
        writer.stdout.readline()  # it has written its whole size once: that much is dirty now
        for _ in range(reps):
            changer.change(100)
            loaded.append(timed(lambda: tr.capture(lbl())))
    finally:
        writer.kill()
        writer.wait()
        heavy.unlink(missing_ok=True)
        tr.close()
    rows.append(Row(f"100-file capture under a writer of {size_mb} MB unflushed", med(loaded) * 1000,
                    med(unloaded) * 1000, "same capture unloaded", "<= 2x"))
    done()
    progress("done; removing the trees and stores")
    return rows


def plan_dry_run(run_dir: Path, ws: Path, run_id: str, pivot: BoundaryLabel, want: int) -> None:
    """What ``iterion rewind --dry-run`` does to the record of an in-place run, in a new process
    (iterion/rewind/rewind.py ``_dry_run``, with the product's own functions): one read-only
    versioning, lent to the pivots' check, the object check and the preview (the run store's
    documents, the workflow and the other runs' records are left out: no tracker reads them)."""
    from iterion.rewind.files import RestoreScope, restore_files
    from iterion.rewind.lent import LentVersioning
    from iterion.rewind.rewind import require_objects

    lent = LentVersioning()
    try:
        v = lent.get(worktree=False, workspace=ws, run_dir=run_dir, run_id=run_id)
        assert any(e.label == pivot for e in v.chain())  # the recorded pivots (``_pre_iterations``)
        require_objects(v, run_id, pivot, RestoreScope.PRODUCED, [])
        assert v.recorded_at(pivot) is not None  # (``other_runs_production``: no other run here)
        report = restore_files(v, pivot, RestoreScope.PRODUCED, workspace=ws, protected=[], dry_run=True,
                               other_runs=[])
    finally:
        lent.close()
    assert len(report.restored) == want, len(report.restored)


# Keeps rewriting a file of SIZE MB in 1 MB chunks, never flushing: the kernel holds its pages dirty.
_WRITER = """
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
chunk = os.urandom(1 << 20)
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
i = 0
while True:
    os.pwrite(fd, chunk, (i % size) << 20)
    i += 1
    if i == size:
        print("ready", flush=True)
"""


def print_rows(n: int, rows: list[Row]) -> None:
    print(f"\n{n} files (load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    print(f"  {'measure':58s} {'ours':>10s} {'git baseline':>12s} {'ratio':>7s}  {'goal':8s} {'peak MB':>8s}  baseline")
    for r in rows:
        base = "-" if r.base is None else f"{r.base:10.1f}"
        ratio = "-" if r.ratio is None else f"{r.ratio:7.2f}"
        peak = "-" if r.peak is None else f"{r.peak:8.0f}"
        print(f"  {r.measure:58s} {r.ours:8.1f}{r.unit:>2s} {base:>12s} {ratio:>7s}  {r.goal:8s} {peak:>8s}  "
              f"{r.base_name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated file counts")
    ap.add_argument("--quick", action="store_true", help="3 repetitions instead of 5")
    args = ap.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes takes comma-separated integers, got {args.sizes!r}")
    if not sizes or any(s < 300 for s in sizes):
        ap.error("each size must be at least 300 files (a rewind restores 300)")
    reps = 3 if args.quick else 5
    print(f"bench_scale: sizes {sizes}, median of {reps}; {git(Path.cwd(), '--version').strip()}")
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"bench-scale-{n}-") as tmp:
            progress(f"{n} files, in {tmp}")
            rows = measure_size(n, reps, Path(tmp))
        print_rows(n, rows)


if __name__ == "__main__":
    main()
