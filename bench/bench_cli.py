"""Start-up of the CLI: median wall time of a command, beside ``python -c pass`` in the same run.

Goals (issue 14, point 10), as medians on the 2-core development machine: ``--version`` and
``--help`` under 100 ms, ``inspect`` (the run list) and ``validate`` of the demo under 200 ms.
Each command is a fresh process (what a person at a prompt pays), run in a scratch git
repository whose store holds 20 demo runs (three in four finished, the rest parked at the gate),
so ``inspect`` lists what a user's store holds rather than an empty one. ``--version``, ``--help``,
``validate FILE`` and ``inspect [--run-id ID] [--events] [--all] [--store-dir DIR] [--json]`` are
answered without typer (cli/startup.py); ``inspect --limit 5`` shows what a command typer parses
costs (typer 0.29 coerces its parameters through pydantic).

    .venv/bin/python bench/bench_cli.py            # 15 runs per command
    .venv/bin/python bench/bench_cli.py --runs 5   # quicker
    .venv/bin/python bench/bench_cli.py --store-runs 1   # a store holding one run
    .venv/bin/python bench/bench_cli.py --no-bytecode  # every start compiles the sources again

Bytecode: an installed iterion starts from compiled bytecode (pip compiles it at install, and
Python caches it in ``__pycache__`` on a first run). An environment that sets
``PYTHONDONTWRITEBYTECODE`` (this sandbox does) never caches it for an editable checkout, so every
start would compile each imported project module from source again, which is not what a user
pays; so the bench drops that variable (the warm-up run then writes ``__pycache__``, ignored by
git) unless ``--no-bytecode`` asks for exactly that cost.
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

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo"
GOALS_MS = {"--version": 100, "--help": 100, "inspect": 200, "validate demo.bot": 200}


def _median_ms(argv: list[str], cwd: Path, runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _project(root: Path, env: dict[str, str], store_runs: int) -> Path:
    """A git repository with the demo and ``store_runs`` runs of it in its store (every fourth
    one parked at the demo's gate, the others finished)."""
    proj = root / "proj"
    shutil.copytree(DEMO, proj)
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "demo"]):
        subprocess.run(["git", *args], cwd=proj, env=env, check=True, capture_output=True)
    for i in range(store_runs):
        answers = [] if i % 4 == 3 else ["--answers-file", "answers.json"]
        subprocess.run([sys.executable, "-m", "cli.main", "run", "demo.bot", *answers],
                       cwd=proj, env=env, capture_output=True, check=False)
    return proj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--store-runs", type=int, default=20, help="runs in the store `inspect` lists (default 20)")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="measure with PYTHONDONTWRITEBYTECODE=1: every start compiles the sources")
    args = parser.parse_args()
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if args.no_bytecode:
        base_env["PYTHONDONTWRITEBYTECODE"] = "1"
    env = {**base_env, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@invalid",
           "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        proj = _project(Path(tmp), env, args.store_runs)
        cli = [sys.executable, "-m", "cli.main"]
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "--version": [*cli, "--version"],
            "--help": [*cli, "--help"],
            "inspect": [*cli, "inspect"],
            # (a command line typer parses: its parameter coercion imports pydantic; no goal)
            "inspect --limit 5": [*cli, "inspect", "--limit", "5"],
            "validate demo.bot": [*cli, "validate", "demo.bot"],
        }
        for argv in cases.values():  # warm the page cache and the bytecode
            subprocess.run(argv, cwd=proj, env=env, capture_output=True, check=False)
        medians = {name: _median_ms(argv, proj, args.runs, env) for name, argv in cases.items()}
    base = medians["python -c pass"]
    bytecode = "compiled from source every run" if args.no_bytecode else "cached bytecode"
    print(f"median of {args.runs} runs, each a fresh process ({os.cpu_count()} cpus, {bytecode}, "
          f"{args.store_runs} runs in the store, load average {os.getloadavg()[0]:.2f})")
    print(f"{'command':<20} {'median':>9} {'x python':>9} {'over python':>12} {'goal':>7}")
    for name, ms in medians.items():
        goal = GOALS_MS.get(name)
        verdict = "" if goal is None else (f"<{goal} ok" if ms < goal else f"<{goal} MISS")
        print(f"{name:<20} {ms:>7.1f}ms {ms / base:>8.2f}x {ms - base:>10.1f}ms {verdict:>9}")


if __name__ == "__main__":
    main()
