"""Store growth per finished worktree run (issue 30, points 3 and 5): the row bench_scale.py prints.

    .venv/bin/python bench/worktree_growth.py               # 10,000 files, standalone
    .venv/bin/python bench/worktree_growth.py --files 1000

A finished worktree run's checkout is removed once its final commit is recorded
(iterion/engine/worktree.py), so what a run leaves in the store is its run directory (document,
events, checkpoints). Measured: the store's bytes (du, each inode once) before and after a second
finished `worktree: auto` run of a one-node workflow in a committed tree of N files (the first
run pays one-time set-up), against the growth of the repository's `.git` in that same run (its
boundary commits and refs, and gitrefs' per-run records: what a run leaves in git). Goal: < 1 MB.

A second row: a run parked at a first human gate (the checkout is made lazily, before the first
node that needs the workspace, so such a run has none): the store's growth for that run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOW = """
tool touch:
  command: "echo done > iterion-bench-out.txt"

workflow wt_growth:
  entry: touch
  worktree: auto
  touch -> done
"""


def worktree_growth(ws: Path, base: Path) -> tuple[str, float, float, str, str, str]:
    """Two finished worktree runs in the committed repository ``ws`` (left as it was: no merge
    into its branch), a store under ``base``; bench_scale's Row fields: (measure, ours MB,
    baseline MB, baseline name, goal, unit)."""
    from bench_scale import du

    from iterion.engine.launch import LaunchOptions, launch_run
    from iterion.store import Store

    src = base / "wt-growth-src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "grow.bot").write_text(FLOW)
    store = Store(base / "wt-growth-store")

    def one(i: int) -> None:
        r = launch_run(store, src / "grow.bot", LaunchOptions(workspace=ws, auto_merge=False, watch=False,
                                                             branch_name=f"iterion/bench/wt-growth-{i}"))
        assert r.status.value == "finished", r.error
        doc = store.load_run(r.run_id)
        assert doc.worktree is not None and doc.worktree.released, "the finished run's worktree was kept"

    one(1)
    before, git_before = du(store.root), du(ws / ".git")
    one(2)
    return ("store growth per finished worktree run", (du(store.root) - before) / 1e6,
            (du(ws / ".git") - git_before) / 1e6, ".git growth", "< 1 MB", "MB")


GATE_FLOW = """
schema ok:
  go: bool

human gate:
  output: ok

tool touch:
  command: "echo done > iterion-bench-out.txt"

workflow wt_parked:
  entry: gate
  worktree: auto
  gate -> touch when go
  gate -> done when not go
  touch -> done
"""


def parked_growth(ws: Path, base: Path) -> tuple[str, float, float, str, str, str]:
    """A worktree run parked at a first human gate: the store's growth (the same Row fields)."""
    from bench_scale import du

    from iterion.engine.launch import LaunchOptions, launch_run
    from iterion.store import Store

    src = base / "wt-parked-src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "parked.bot").write_text(GATE_FLOW)
    store = Store(base / "wt-parked-store")

    def one(i: int) -> None:
        r = launch_run(store, src / "parked.bot", LaunchOptions(workspace=ws, auto_merge=False, watch=False,
                                                               branch_name=f"iterion/bench/wt-parked-{i}"))
        assert r.status.value == "paused_waiting_human", r.error

    one(1)
    before, git_before = du(store.root), du(ws / ".git")
    one(2)
    return ("store growth per worktree run parked at a first gate", (du(store.root) - before) / 1e6,
            (du(ws / ".git") - git_before) / 1e6, ".git growth", "< 1 MB", "MB")


def main() -> None:
    from bench_scale import build_tree

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-wt-growth-") as tmp:
        ws = Path(tmp) / "ws"
        build_tree(ws, args.files)
        for row in (worktree_growth, parked_growth):
            measure, ours, git_mb, git_name, goal, unit = row(ws, Path(tmp))
            print(f"{args.files} files: {measure}: {ours:.3f} {unit} (goal {goal}); {git_name}: {git_mb:.3f} {unit}")


if __name__ == "__main__":
    main()
