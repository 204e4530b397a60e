"""Boundary write vs `GIT_INDEX_FILE=<tmp> git add -A && git write-tree`, measured in the same run.

    .venv/bin/python bench/bench_gitrefs.py            # 20,000 files, 100 changed
    .venv/bin/python bench/bench_gitrefs.py --quick    # 2,000 files, 100 changed

Two baselines, because "<tmp>" can mean two things: a fresh (empty) index, which re-hashes
every file, and a copy of the repository's index, which starts from git's stat cache.
Scenarios: the repository with a settled index (unchanged; N files changed before each round),
and a fresh `git worktree add` of it (the engine's `worktree: auto`), unchanged.
Ratios are ours / baseline (below 1 = faster than git's own command).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitrefs import RunRefs  # noqa: E402
from gitrefs.boundary import BoundaryKind, BoundaryLabel  # noqa: E402

ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@invalid",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@invalid", "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env or ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_tree(root: Path, files: int) -> list[Path]:
    paths = []
    per_dir = 100
    for i in range(files):
        d = root / f"d{i // (per_dir * 20):03d}" / f"s{(i // per_dir) % 20:02d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        p = d / f"f{i:06d}.txt"
        p.write_text(f"file {i}\n" + "x" * (i % 700))
        paths.append(p)
    return paths


def interleaved_medians(contenders: dict[str, Callable[[], object]], before: Callable[[], None],
                        repeats: int) -> dict[str, float]:
    """Round-robin the contenders (one warm-up round, not counted) so drift hits them all alike."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for round_no in range(repeats + 1):
        for name, fn in contenders.items():
            before()
            t0 = time.perf_counter()
            fn()
            if round_no:
                samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2,000 files instead of 20,000")
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--changed", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args()
    files = args.files or (2_000 if args.quick else 20_000)
    repeats = args.repeats or (3 if args.quick else 5)

    with tempfile.TemporaryDirectory(prefix="bench-gitrefs-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        paths = build_tree(repo, files)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "tree")
        git(repo, "status", "--porcelain")  # settle racy entries, as a user's index would be
        tmp_index = Path(tmp) / "baseline-index"
        counter = iter(range(10**9))

        def contenders(workdir: Path, run_id: str) -> dict[str, Callable[[], object]]:
            rr = RunRefs.start(workdir, run_id)
            gitdir = Path(git(workdir, "rev-parse", "--absolute-git-dir"))

            def ours() -> None:
                rr.write_boundary(BoundaryLabel(BoundaryKind.NODES, "n", next(counter)))

            def baseline(seed_from_user_index: bool) -> Callable[[], object]:
                def run() -> str:
                    env = {**ENV, "GIT_INDEX_FILE": str(tmp_index)}
                    git(workdir, "add", "-A", env=env)
                    return git(workdir, "write-tree", env=env)

                def prepare() -> None:
                    tmp_index.unlink(missing_ok=True)
                    if seed_from_user_index:
                        shutil.copy2(gitdir / "index", tmp_index)
                return lambda: (prepare(), run())[1]
            # The baselines' prepare() is part of what they do (the copy is what a snapshot did too).
            return {"boundary write (ours)": ours,
                    "git add -A + write-tree, empty tmp index": baseline(False),
                    "git add -A + write-tree, copy of index": baseline(True)}

        change_round = iter(range(10**9))

        def change_files() -> None:
            r = next(change_round)
            for p in paths[: args.changed]:
                p.write_text(f"changed in round {r}\n")

        def nothing() -> None:
            pass

        results: dict[str, dict[str, float]] = {}
        in_repo = contenders(repo, "bench")
        for scenario, before in (("unchanged", nothing), (f"{args.changed} changed", change_files)):
            results[scenario] = interleaved_medians(in_repo, before, repeats)
        # What the engine's `worktree: auto` runs on: a fresh `git worktree add`, whose index
        # nobody settled (checkout writes it in the same second as the files: racily clean).
        wt = Path(tmp) / "wt"
        git(repo, "worktree", "add", "-q", "-b", "run", str(wt), "HEAD")
        results["unchanged, fresh worktree"] = interleaved_medians(contenders(wt, "bench-wt"), nothing, repeats)

    print(f"files={files} changed={args.changed} repeats={repeats} (median seconds)")
    for scenario, row in results.items():
        ours_t = row["boundary write (ours)"]
        print(f"\n[{scenario}]")
        for name, t in row.items():
            print(f"  {name:45s} {t * 1000:9.1f} ms")
        for name, t in row.items():
            if name != "boundary write (ours)":
                print(f"  ratio ours / {name:32s} {ours_t / t:6.2f}")


if __name__ == "__main__":
    main()
