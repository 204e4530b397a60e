"""The engine's own cost per node: checkpoint + event + workspace boundary, on an unchanged workspace.

Runs a chain of compute nodes (no shell, no model: what is left is the engine's overhead) over a
workspace of N files, in place (workspacetrack, with and without the watchdog journal) and in a
worktree (gitrefs), and prints the per-node cost beside baselines measured in the same run: a
bare ``os.scandir``+``lstat`` walk of the tree and ``git status --porcelain``.

    .venv/bin/python bench/bench_engine.py            # 5,000 files, 40 nodes
    .venv/bin/python bench/bench_engine.py --quick    # 500 files, 10 nodes
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

from iterion.engine.launch import LaunchOptions, launch_run  # noqa: E402
from iterion.store import Store  # noqa: E402
from iterion.store.checkpoint import Checkpoint  # noqa: E402

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=GIT_ENV)


def make_tree(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    per_dir = 100
    for i in range(files):
        d = root / f"d{i // per_dir:03d}"
        d.mkdir(exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n" * 4)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")


def workflow(path: Path, nodes: int, worktree: bool) -> Path:
    lines = ["schema n:", "  v: int", ""]
    for i in range(nodes):
        lines += [f"compute c{i}:", "  output: n", "  expr:", f'    v: "{i}"', ""]
    lines += ["workflow bench:", "  entry: c0"] + (["  worktree: auto"] if worktree else [])
    lines += [f"  c{i} -> c{i + 1}" for i in range(nodes - 1)] + [f"  c{nodes - 1} -> done", ""]
    path.write_text("\n".join(lines))
    return path


def walk(root: Path) -> int:
    n = 0
    stack = [str(root)]
    while stack:
        for entry in os.scandir(stack.pop()):
            if entry.name == ".git":
                continue
            entry.stat(follow_symlinks=False)
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                n += 1
    return n


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


class Timed:
    """Wall time spent inside a method, summed over calls (the bench's own instrumentation)."""

    def __init__(self, owner: type, name: str) -> None:
        self.owner, self.name, self.total, self.calls = owner, name, 0.0, 0
        self.orig = getattr(owner, name)
        timed = self

        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return timed.orig(*args, **kwargs)
            finally:
                timed.total += time.perf_counter() - t0
                timed.calls += 1

        setattr(owner, name, wrapper)

    def reset(self) -> None:
        self.total, self.calls = 0.0, 0

    def restore(self) -> None:
        setattr(self.owner, self.name, self.orig)


PIECES: dict[str, Timed] = {}


def per_node(store: Store, bot: Path, ws: Path, nodes: int, *, watch: bool) -> tuple[float, str, dict[str, float]]:
    t0 = time.perf_counter()
    result = launch_run(store, bot, LaunchOptions(workspace=ws, watch=watch))
    total = time.perf_counter() - t0
    assert result.status.value == "finished", result.error
    evs = store.read_events(result.run_id)
    starts = [e.time for e in evs if e.type == "node_started"]
    # steady state: from the first node's start to the last node's start, per node
    span = (starts[-1] - starts[0]).total_seconds() / (len(starts) - 1)
    # the pieces, per node, excluding the launch's cold first capture (pre of the first node)
    first_capture = PIECES["boundary"].first
    pieces = {k: (t.total - (first_capture if k == "boundary" else 0.0)) / nodes for k, t in PIECES.items()}
    for t in PIECES.values():
        t.reset()
    return span, f"(whole run incl. launch {total:.2f}s)", pieces


def _track_first(timed: Timed) -> None:
    """Remember the duration of the first mark of each run (the cold capture of the launch)."""
    timed.first = 0.0  # type: ignore[attr-defined]
    inner = getattr(timed.owner, timed.name)

    def wrapper(self, label):  # type: ignore[no-untyped-def]
        before = timed.total
        out = inner(self, label)
        if timed.calls == 1:
            timed.first = timed.total - before  # type: ignore[attr-defined]
        return out

    setattr(timed.owner, timed.name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="500 files, 10 nodes")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--nodes", type=int, default=None)
    args = ap.parse_args()
    files = args.files or (500 if args.quick else 5000)
    nodes = args.nodes or (10 if args.quick else 40)
    with tempfile.TemporaryDirectory(prefix="iterion-bench-") as tmp:
        base = Path(tmp)
        ws = base / "ws"
        make_tree(ws, files)
        src = base / "src"
        src.mkdir()
        in_place = workflow(src / "inplace.bot", nodes, worktree=False)
        in_worktree = workflow(src / "worktree.bot", nodes, worktree=True)

        walk_s = best(lambda: walk(ws))
        status_s = best(lambda: subprocess.run(["git", "status", "--porcelain"], cwd=ws, check=True,
                                               capture_output=True, env=GIT_ENV))
        store = Store(base / "store")
        # the three pieces, measured alone on the store the runs use
        cp = Checkpoint(run_id="x" * 32, outputs={f"c{i}": {"v": i} for i in range(nodes)})
        ckpt_s = best(lambda: store.save_checkpoint("bench-pieces", cp), repeat=20)
        log = store.events("bench-pieces")
        event_s = best(lambda: log.append("boundary_written", node="c0", iteration=0, payload={"label": "x"}),
                       repeat=20)

        from iterion.engine.versioning import Versioning
        from iterion.store.events import EventLog

        PIECES["checkpoint"] = Timed(Store, "save_checkpoint")
        PIECES["events"] = Timed(EventLog, "append")
        PIECES["boundary"] = Timed(Versioning, "mark")
        _track_first(PIECES["boundary"])
        journal_s, _, journal_p = per_node(store, in_place, ws, nodes, watch=True)
        walk_node_s, note, walk_p = per_node(store, in_place, ws, nodes, watch=False)
        worktree_s, _, worktree_p = per_node(store, in_worktree, ws, nodes, watch=False)
        for t in PIECES.values():
            t.restore()

        print(f"workspace: {files} files, unchanged; chain of {nodes} compute nodes; per node = checkpoint + "
              f"events + pre/nodes boundaries")
        print(f"baseline  scandir+lstat walk        {walk_s * 1000:8.1f} ms")
        print(f"baseline  git status --porcelain    {status_s * 1000:8.1f} ms")
        print(f"piece     checkpoint write (fsync)  {ckpt_s * 1000:8.1f} ms")
        print(f"piece     event append (fsync)      {event_s * 1000:8.1f} ms")
        rows = [("in place, watchdog journal", journal_s, journal_p), ("in place, stat walk", walk_node_s, walk_p),
                ("worktree, gitrefs", worktree_s, worktree_p)]
        for name, s, p in rows:
            print(f"per node  {name:<28}{s * 1000:8.1f} ms   = {s / walk_s:5.2f}x walk, "
                  f"{s / status_s:5.2f}x git status")
            print(f"            of which boundaries {p['boundary'] * 1000:6.1f} ms, checkpoint "
                  f"{p['checkpoint'] * 1000:5.1f} ms, events {p['events'] * 1000:5.1f} ms")
        print(f"          {note}")


if __name__ == "__main__":
    main()
