"""The cost of a rewind (pivot, invalidation, file restore, checkpoint, event) on a large workspace.

    .venv/bin/python bench/bench_rewind.py            # 20,000 files, 3 nodes changing 100 files each
    .venv/bin/python bench/bench_rewind.py --quick    # 2,000 files

Each rewind is measured beside a baseline taken in the same run on the same tree:

* in place (workspacetrack, scope produced) vs ``git status --porcelain`` (a whole-tree stat walk);
* worktree (gitrefs, scope full) vs ``GIT_INDEX_FILE=<copy of the index> git add -A && git write-tree``.

Ratios are rewind / baseline, for wall time and for the rewinding process's CPU time (a restore's
wall time is dominated by the per-file fsync of its durable writes). The rewind is run once per
fresh run (it changes the run), so each figure is the median over ``--repeat`` freshly built runs.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitrefs.boundary import BoundaryKind, BoundaryLabel  # noqa: E402
from iterion.engine.versioning import open_versioning  # noqa: E402
from iterion.rewind.rewind import RewindRequest, rewind_run  # noqa: E402
from iterion.store import (Checkpoint, RunDoc, RunStatus, Store, WorkspaceMode, WorktreeInfo,  # noqa: E402
                           new_id)

ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@invalid",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@invalid", "GIT_CONFIG_NOSYSTEM": "1"}

BOT = """\
tool n1:
  command: "true"

tool n2:
  command: "true"

tool n3:
  command: "true"

workflow bench:
  entry: n1
  n1 -> n2
  n2 -> n3
  n3 -> done
"""


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env or ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_repo(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for i in range(files):
        d = root / f"d{i // 100:03d}"
        d.mkdir(exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")
    (root / "bench.bot").write_text(BOT)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")


def fake_run(store: Store, ws: Path, *, worktree: bool, files: int, changed: int) -> str:
    """Three executed nodes, each rewriting ``changed`` files (n2 also creates as many)."""
    doc = RunDoc(id=new_id(), name="bench-run", workflow_name="bench", file_path=str(ws / "bench.bot"),
                 status=RunStatus.FAILED_RESUMABLE, workflow_source=BOT, workflow_sources={"bench.bot": BOT},
                 workspace_dir=str(ws),
                 workspace_mode=WorkspaceMode.WORKTREE if worktree else WorkspaceMode.IN_PLACE,
                 worktree=WorktreeInfo(path=str(ws), branch="main", base_commit=git(ws, "rev-parse", "HEAD"))
                 if worktree else None)
    store.create_run(doc)
    v = open_versioning(worktree=worktree, workspace=ws, run_dir=store.run_dir(doc.id), run_id=doc.id,
                        start=True, watch=False)
    cp = Checkpoint(run_id=doc.id)
    step = max(1, files // changed)
    for k, node in enumerate(("n1", "n2", "n3")):
        v.mark(BoundaryLabel(BoundaryKind.PRE, node, 0))
        for j in range(changed):
            i = (j * step + k) % files
            (ws / f"d{i // 100:03d}" / f"f{i:05d}.txt").write_text(f"file {i} by {node}\n")
            if node == "n2":
                (ws / f"new{j:04d}.txt").write_text("new\n")
        v.mark(BoundaryLabel(BoundaryKind.NODES, node, 0))
        cp.record_executed(node, 0)
        cp.set_output(node, {"exit_code": 0})
    v.mark(BoundaryLabel(BoundaryKind.FAIL, "n3", 0))
    v.close()
    cp.restart_node = "n3"
    store.save_checkpoint(doc.id, cp)
    return doc.id


def timed(fn) -> float:  # noqa: ANN001 - a thunk
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed_cpu(fn) -> tuple[float, float]:  # noqa: ANN001 - a thunk
    """(wall, this process's CPU): a restore's wall time is mostly its per-file fsyncs."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def baseline_status(ws: Path) -> float:
    return timed(lambda: git(ws, "status", "--porcelain"))


def baseline_write_tree(ws: Path, tmp: Path) -> float:
    index = tmp / "bench-index"
    gitdir = Path(git(ws, "rev-parse", "--absolute-git-dir"))
    shutil.copy(gitdir / "index", index)
    env = {**ENV, "GIT_INDEX_FILE": str(index)}
    return timed(lambda: (git(ws, "add", "-A", env=env), git(ws, "write-tree", env=env)))


def measure(files: int, changed: int, repeat: int, worktree: bool) -> tuple[float, float, float, int]:
    rewinds, cpus, bases, restored = [], [], [], 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-rewind-") as t:
            tmp = Path(t)
            ws = tmp / "ws"
            build_repo(ws, files)
            store = Store(tmp / "store")
            run_id = fake_run(store, ws, worktree=worktree, files=files, changed=changed)
            bases.append(baseline_write_tree(ws, tmp) if worktree else baseline_status(ws))
            result: list = []
            req = RewindRequest(run_id=run_id, node="n2")
            wall, cpu = timed_cpu(lambda: result.append(rewind_run(store, req)))
            rewinds.append(wall)
            cpus.append(cpu)
            f = result[0].files
            restored = len(f.restored) + len(f.removed)
    return statistics.median(rewinds), statistics.median(cpus), statistics.median(bases), restored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 files instead of 20,000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    # the rewind imports the DSL on first use: warm it so the first figure is not an import
    import iterion.dsl  # noqa: F401
    files = 2_000 if args.quick else 20_000
    changed = 100
    print(f"workspace: {files} files; n1, n2, n3 each rewrite {changed} files (n2 also creates {changed}); "
          f"rewind to n2; median of {args.repeat}")
    for worktree, label, base_label in ((False, "in place (produced)", "git status --porcelain"),
                                        (True, "worktree (full)", "git add -A && git write-tree")):
        rw, cpu, base, restored = measure(files, changed, args.repeat, worktree)
        print(f"{label:20s} rewind {rw * 1000:8.1f} ms wall, {cpu * 1000:7.1f} ms cpu "
              f"({restored} paths restored) | baseline [{base_label}] {base * 1000:7.1f} ms | "
              f"ratio wall {rw / base:5.2f}, cpu {cpu / base:5.2f}")


if __name__ == "__main__":
    main()
