"""The kill series on a worktree run: the restore is a git revert (bank ref, revert commit, the
tree diff applied path by path). Killed after some of its file operations, it is refused by
`resume`, shown by `inspect`, and finished by `rewind` on the tree an unkilled rewind produces,
with HEAD on a revert commit of that tree and the index matching it."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from iterion.store import Store

from ..conftest import git, make_checkout, write_bot
from .faultlib import (
    cli,
    cli_json,
    error_lines,
    fast_dir,
    restore_template,
    save_template,
    store_hash,
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
if sys.argv[1] == "user":
    for i in range(150):
        write(f"src/{i:03d}.txt", f"committed {i}\n", 0o755 if i % 4 == 0 else 0o644)
else:
    for i in range(100):
        write(f"src/{i:03d}.txt", f"changed by the node {i}\n")
    for i in range(100, 150):
        os.remove(os.path.join(ws, f"src/{i:03d}.txt"))
    for i in range(200):
        write(f"gen/{i // 50}/{i:03d}.txt", f"generated {i}\n")
'''

FLOW = """\
tool change:
  command: "{py} {gen} node"

tool check:
  command: "test -f {allow}"

workflow kill_worktree:
  entry: change
  worktree: auto
  change -> check
  check -> done
"""

OPS = 350  # the tree diff: 200 removals, then 150 writes
KILL_POINTS = ["restore:1", "restore:199", "restore:201", f"restore:{OPS}", "rewind-parked:1"]


@dataclass
class Fixture:
    live: Path
    template: Path
    repo: Path
    store: Path
    run_id: str
    wt: Path
    reference: str
    final: str


def _final_tree(repo: Path, store: Path, run_id: str, wt: Path) -> str:
    """The finished run's final tree: its worktree is removed once finished (its final commit
    recorded), so the tree is read from that commit."""
    doc = Store(store).load_run(run_id)
    assert doc.status.value == "finished" and doc.final_commit and not wt.exists()
    return git(repo, "rev-parse", f"{doc.final_commit}^{{tree}}").strip()


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    with fast_dir(tmp_path_factory.mktemp("kill-worktree")) as base:
        gen = base / "gen.py"
        gen.write_text(GEN)
        allow = base / "allow"
        live = base / "live"
        live.mkdir()
        repo = make_checkout(live / "repo")
        subprocess.run([sys.executable, str(gen), "user"], cwd=repo, check=True)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "the project")
        bot = write_bot(base / "src", FLOW.format(py=sys.executable, gen=gen, allow=allow))
        store = live / "store"
        out = cli_json(repo, store, "run", str(bot))
        assert out["status"] == "failed_resumable", out
        run_id, wt = out["run_id"], Path(out["workspace"])
        assert wt.is_relative_to(live)
        allow.write_text("")
        template = base / "template"
        save_template(live, template)
        res = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "change")
        assert (len(res["files"]["restored"]), len(res["files"]["removed"])) == (150, 200), res["files"]
        reference = tree_hash(wt, skip=(".git",))
        assert git(wt, "status", "--porcelain") == ""
        assert cli(repo, store, "resume", "--run-id", run_id).returncode == 0
        final = _final_tree(repo, store, run_id, wt)
        restore_template(template, live)
        yield Fixture(live, template, repo, store, run_id, wt, reference, final)


# the main suite kills at the restore's first and last operations and at the parked step; the
# removal/write boundary (199, 201) runs in the heavy tier (.ci/run), as the in-place series'
@pytest.mark.parametrize("point", [pytest.param(p, marks=[pytest.mark.heavy] if p in ("restore:199", "restore:201")
                                                else []) for p in KILL_POINTS])
def test_worktree_rewind_killed_at_point_is_finished_by_rewind(fx: Fixture, point: str) -> None:
    restore_template(fx.template, fx.live)
    run_id = fx.run_id
    killed = cli(fx.repo, fx.store, "rewind", "--run-id", run_id, "--node", "change",
                 env={"ITERION_TEST_KILL_AT": point})
    assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
    assert (fx.store / "runs" / run_id / "rewind-intent.json").is_file()
    before = (tree_hash(fx.live), store_hash(fx.store))
    proc = cli(fx.repo, fx.store, "resume", "--run-id", run_id)
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1, proc.stderr
    assert f"iterion rewind --run-id {run_id}" in proc.stderr
    assert (tree_hash(fx.live), store_hash(fx.store)) == before
    assert "interrupted rewind: rewind to pre:change:0" in cli(fx.repo, fx.store, "inspect", "--run-id",
                                                               run_id).stdout
    done = cli(fx.repo, fx.store, "rewind", "--run-id", run_id)
    assert done.returncode == 0, (point, done.stdout, done.stderr)
    assert tree_hash(fx.wt, skip=(".git",)) == fx.reference, point
    # HEAD is a revert commit whose tree is the restored tree; the index matches it
    assert git(fx.wt, "status", "--porcelain") == "", point
    assert git(fx.wt, "log", "-1", "--format=%s").startswith("iterion: revert workspace to pre:change:0")
    assert sum(1 for e in Store(fx.store).read_events(run_id) if e.type == "run_rewound") == 1
    resumed = cli(fx.repo, fx.store, "resume", "--run-id", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert _final_tree(fx.repo, fx.store, run_id, fx.wt) == fx.final, point
