"""A rewind SIGKILLed inside its restore can always be finished (issue 11, deliver point 2).

The run: an in-place run whose node `change` rewrites 1,990 files, retargets 10 symlinks,
deletes 1,000 files and creates 1,000 (modes changed on some), then `check` fails. The rewind
to `change` is 4,000 file operations: 1,000 removals, then 3,000 writes. Each trial starts from
the same byte-identical template and SIGKILLs the rewind at one point - after the n-th file
operation (ITERION_TEST_KILL_AT=restore:<n>, the test-only hook of gitrefs/persist/killpoint.py) or after
one of the rewind's durable steps - then checks, with real CLI subprocesses:

* `resume` refuses (exit 2, one `error:` line naming `iterion rewind --run-id R`), and the
  workspace and the store are byte-identical before and after that refusal;
* `inspect` shows the interrupted rewind;
* `rewind` (no pivot argument, or the same one) finishes it: the workspace is byte-identical
  (full-tree hash, modes and link targets included) to the tree an unkilled rewind produces,
  the checkpoint is the same, `run_rewound` is recorded once;
* `resume` then finishes the run, on the same tree as the unkilled rewind's resume.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from iterion.store import Store

from ..conftest import git, make_checkout, start_cli, write_bot
from .faultlib import (
    cli,
    cli_json,
    error_lines,
    fast_dir,
    restore_template,
    save_template,
    store_hash,
    tree_files,
    tree_hash,
)

GEN = r'''
import os, sys
ws = os.getcwd()
def write(rel, text, mode=0o644):
    p = os.path.join(ws, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
if sys.argv[1] == "user":          # the person's tree before the run
    for i in range(3000):
        write(f"f/{i // 100:02d}/{i:04d}.txt", f"user file {i}\n", 0o755 if i % 5 == 0 else 0o644)
    for i in range(10):
        os.makedirs(os.path.join(ws, "l"), exist_ok=True)
        os.symlink(f"../f/00/{i:04d}.txt", os.path.join(ws, "l", f"{i}.lnk"))
else:                              # the node: 4,000 changes
    for i in range(1990):
        write(f"f/{i // 100:02d}/{i:04d}.txt", f"changed by the node {i}\n", 0o600 if i % 7 == 0 else 0o644)
    for i in range(10):
        os.remove(os.path.join(ws, "l", f"{i}.lnk"))
        os.symlink(f"../f/01/{100 + i:04d}.txt", os.path.join(ws, "l", f"{i}.lnk"))
    for i in range(2000, 3000):
        os.remove(os.path.join(ws, f"f/{i // 100:02d}/{i:04d}.txt"))
    for i in range(1000):
        write(f"n/{i // 100}/{i:04d}.txt", f"new {i}\n")
'''

FLOW = """\
tool change:
  command: "{py} {gen} node"

tool check:
  command: "test -f {allow}"

workflow kill_series:
  entry: change
  change -> check
  check -> done
"""

OPS = 4000  # 1,000 removals, then 3,000 writes
RESTORE_POINTS = [1, 2, 3, 137, 500, 999, 1000, 1001, 1002, 1500, 1989, 2000, 2001, 2500, 2990, 3000, 3001,
                  3500, 3998, 3999, OPS]
STEP_POINTS = ["rewind-intent", "rewind-files", "rewind-checkpoint", "rewind-parked", "rewind-event"]
KILL_POINTS = [f"restore:{n}" for n in RESTORE_POINTS] + [f"{s}:1" for s in STEP_POINTS]
# the main suite kills at the restore's edges (its first operation, the last removal, the first
# write, its last operation) and at every step; the other restore points run in the heavy tier
# (pyproject's `heavy` marker, .ci/run), the same test
MAIN_POINTS = {"restore:1", "restore:1000", "restore:1001", f"restore:{OPS}"}


def _tiered(point: str) -> Any:
    heavy = point.startswith("restore:") and point not in MAIN_POINTS
    return pytest.param(point, marks=[pytest.mark.heavy] if heavy else [])


@dataclass
class Fixture:
    live: Path       # ws/ and store/ live here, at the paths the run recorded
    template: Path   # the failed run, as it was before any rewind
    ws: Path
    store: Path
    run_id: str
    reference: str           # tree hash after an unkilled rewind
    reference_cp: dict       # its checkpoint (minus written_at)
    final: str               # tree hash after that rewind's resume


def _cp(store: Path, run_id: str) -> dict:
    data = json.loads((store / "runs" / run_id / "checkpoint.json").read_text())
    data.pop("written_at", None)
    return data


def _ws_hash(ws: Path) -> str:
    """The workspace's hash minus what iterion may add to git's object store and its pin refs
    (a capture pins the blobs it references: workspacetrack/gitsource.py)."""
    return tree_hash(ws, skip=(".git/objects", ".git/refs/iterion"))


def _person(files: dict[str, tuple[int, bytes]]) -> dict[str, tuple[int, bytes]]:
    return {k: v for k, v in files.items() if not k.startswith((".git/objects/", ".git/refs/iterion/"))}


def _rewound_events(store: Path, run_id: str) -> int:
    return sum(1 for e in Store(store).read_events(run_id) if e.type == "run_rewound")


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    with fast_dir(tmp_path_factory.mktemp("kill-series")) as base:
        yield from _build(base)


def _build(base: Path) -> Iterator[Fixture]:
    gen = base / "gen.py"
    gen.write_text(GEN)
    allow = base / "allow"
    live = base / "live"
    live.mkdir()
    ws = make_checkout(live / "ws")
    subprocess.run([sys.executable, str(gen), "user"], cwd=ws, check=True)
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "the person's tree")
    user_files = tree_files(ws)
    bot = write_bot(base / "src", FLOW.format(py=sys.executable, gen=gen, allow=allow))
    store = live / "store"
    run = cli_json(ws, store, "run", str(bot))
    assert run["status"] == "failed_resumable", run
    run_id = run["run_id"]
    allow.write_text("")  # the cause is fixed: the replay of check passes
    template = base / "template"
    save_template(live, template)

    # the reference: an unkilled rewind of the same state, and its resume
    res = cli_json(ws, store, "rewind", "--run-id", run_id, "--node", "change")
    files = res["files"]
    assert (len(files["restored"]), len(files["removed"])) == (3000, 1000), {k: len(v) for k, v in files.items()
                                                                           if isinstance(v, list)}
    # the person's tree, byte for byte (emptied n/ dirs stay); iterion only adds git objects and
    # its pin ref (refs/iterion/pins/<run>: workspacetrack/gitsource.py), never anything else
    assert _person(tree_files(ws)) == _person(user_files)
    reference, reference_cp = _ws_hash(ws), _cp(store, run_id)
    assert cli(ws, store, "resume", "--run-id", run_id).returncode == 0
    final = _ws_hash(ws)
    restore_template(template, live)
    yield Fixture(live, template, ws, store, run_id, reference, reference_cp, final)


def _killed_rewind(fx: Fixture, point: str) -> None:
    proc = cli(fx.ws, fx.store, "rewind", "--run-id", fx.run_id, "--node", "change",
               env={"ITERION_TEST_KILL_AT": point})
    assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stdout, proc.stderr)


def _check_interrupted_then_finish(fx: Fixture, label: object, *, same_pivot: bool) -> None:
    run_id = fx.run_id
    intent = fx.store / "runs" / run_id / "rewind-intent.json"
    assert intent.is_file(), label
    # resume refuses, and the refusal changes nothing
    before = (_ws_hash(fx.ws), store_hash(fx.store))
    proc = cli(fx.ws, fx.store, "resume", "--run-id", run_id)
    assert proc.returncode == 2, (label, proc.stderr)
    assert error_lines(proc.stderr) == proc.stderr.splitlines(), (label, proc.stderr)
    assert len(error_lines(proc.stderr)) == 1 and f"iterion rewind --run-id {run_id}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (_ws_hash(fx.ws), store_hash(fx.store)) == before, label
    # inspect shows it
    shown = cli(fx.ws, fx.store, "inspect", "--run-id", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "interrupted rewind: rewind to pre:change:0" in shown.stdout, shown.stdout
    assert f"finish it with `iterion rewind --run-id {run_id}`" in shown.stdout
    # rewind finishes it: the tree of an unkilled rewind
    args = ["--node", "change"] if same_pivot else []
    done = cli(fx.ws, fx.store, "rewind", "--run-id", run_id, *args)
    assert done.returncode == 0, (label, done.stdout, done.stderr)
    assert f"finished the interrupted rewind of run {run_id}" in done.stdout, done.stdout
    assert not intent.exists()
    assert _ws_hash(fx.ws) == fx.reference, label
    assert _cp(fx.store, run_id) == fx.reference_cp, label
    assert _rewound_events(fx.store, run_id) == 1, label
    assert Store(fx.store).load_run(run_id).status.value == "paused_operator"
    # and the run goes on
    resumed = cli(fx.ws, fx.store, "resume", "--run-id", run_id)
    assert resumed.returncode == 0, (label, resumed.stderr)
    assert _ws_hash(fx.ws) == fx.final, label


@pytest.mark.parametrize("point", [_tiered(p) for p in KILL_POINTS])
def test_rewind_killed_at_point_is_refused_by_resume_and_finished_by_rewind(fx: Fixture, point: str) -> None:
    restore_template(fx.template, fx.live)
    _killed_rewind(fx, point)
    _check_interrupted_then_finish(fx, point, same_pivot=KILL_POINTS.index(point) % 2 == 1)


def test_kill_points_are_many_and_distinct() -> None:
    inside = {p for p in KILL_POINTS if p.startswith("restore:")}
    assert len(inside) >= 20 and len(set(KILL_POINTS)) == len(KILL_POINTS)
    assert max(RESTORE_POINTS) == OPS  # the last operation, before the batch's sync


def test_inspect_json_and_list_show_the_interrupted_rewind(fx: Fixture) -> None:
    restore_template(fx.template, fx.live)
    _killed_rewind(fx, "restore:1234")
    detail = cli_json(fx.ws, fx.store, "inspect", "--run-id", fx.run_id)
    assert detail["interrupted_rewind"]["anchor"] == "pre:change:0"
    assert detail["interrupted_rewind"]["planned_operations"] == OPS
    assert detail["interrupted_rewind"]["finish_with"] == f"iterion rewind --run-id {fx.run_id}"
    rows = cli_json(fx.ws, fx.store, "inspect")
    assert [r["rewind_interrupted"] for r in rows if r["id"] == fx.run_id] == [True]
    # a dry run previews the finish and changes nothing
    before = (_ws_hash(fx.ws), store_hash(fx.store))
    dry = cli_json(fx.ws, fx.store, "rewind", "--run-id", fx.run_id, "--dry-run")
    assert dry["completed_interrupted"] and dry["dry_run"] and len(dry["files"]["in_scope"]) == OPS
    assert (_ws_hash(fx.ws), store_hash(fx.store)) == before
    done = cli_json(fx.ws, fx.store, "rewind", "--run-id", fx.run_id)
    assert done["completed_interrupted"] and _ws_hash(fx.ws) == fx.reference
    # the report is the one an unkilled rewind gives
    assert (len(done["files"]["restored"]), len(done["files"]["removed"])) == (3000, 1000)


@pytest.mark.heavy  # four seeded random kills of a 4,000-file restore: the heavy tier (.ci/run)
def test_external_sigkill_at_random_moments_converges(fx: Fixture) -> None:
    """Real `kill -9` from outside at seeded random moments (possibly inside a file write)."""
    rng = random.Random(20261202)
    outcomes: dict[str, int] = {}
    for trial in range(4):
        restore_template(fx.template, fx.live)
        intent = fx.store / "runs" / fx.run_id / "rewind-intent.json"
        proc = start_cli("rewind", "--run-id", fx.run_id, "--node", "change", cwd=fx.ws, store=fx.store,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while not intent.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.4))  # into the restore (or past its end)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if intent.exists():
            outcomes["interrupted"] = outcomes.get("interrupted", 0) + 1
            _check_interrupted_then_finish(fx, ("external", trial), same_pivot=bool(trial % 2))
        else:
            # finished before the kill landed (or killed before its commit point: then untouched)
            outcomes["not interrupted"] = outcomes.get("not interrupted", 0) + 1
            if _rewound_events(fx.store, fx.run_id) == 0:
                assert cli(fx.ws, fx.store, "rewind", "--run-id", fx.run_id, "--node", "change").returncode == 0
            assert _ws_hash(fx.ws) == fx.reference
    print(f"\nexternal SIGKILL outcomes: {outcomes}")
