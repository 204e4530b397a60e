"""A worktree run's checkout is made lazily, before the first node that needs the workspace
(iterion/engine/worktree.py): a run parked at a first human gate has none, a cancel there leaves
none, and a process SIGKILLed while `git worktree add` runs leaves a run that resumes, nothing lost."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from gitrefs import RunRefs
from iterion.engine.worktree import needs_workspace
from iterion.ir import Node, NodeKind, RouterMode
from iterion.store import RunStatus, Store
from iterion.store.run_doc import WorktreeInfo

from ..conftest import run_cli
from .conftest import git, launch, resume, write_bot

GATE_FIRST = """
schema ok:
  go: bool

human gate:
  output: ok

tool one:
  command: "mkdir -p out && echo one > out/one.txt && echo edited >> README.md"

workflow lazy:
  entry: gate
  worktree: auto
  gate -> one when go
  gate -> done when not go
  one -> done
"""


def _worktrees(ws: Path) -> str:
    return git(ws, "worktree", "list", "--porcelain")


def _parked(tmp_path: Path, ws: Path) -> tuple[Store, str, Path]:
    store = Store.open(None, ws)
    r = launch(store, write_bot(tmp_path / "src", GATE_FIRST), ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    doc = store.load_run(r.run_id)
    assert doc.worktree is not None and not doc.worktree.created
    return store, r.run_id, Path(doc.worktree.path)


def _assert_finished_with_product(store: Store, ws: Path, run_id: str, base: str) -> None:
    doc = store.load_run(run_id)
    assert doc.status is RunStatus.FINISHED, doc.error
    assert doc.worktree is not None and doc.worktree.created and doc.worktree.released
    final = doc.final_commit
    assert final and final != base
    # nothing lost: the tool's product is in the final commit, on the run's branch
    assert git(ws, "show", f"{final}:out/one.txt") == "one\n"
    assert git(ws, "show", f"{final}:README.md").endswith("edited\n")
    assert git(ws, "rev-parse", doc.worktree.branch).strip() == final
    assert "prunable" not in _worktrees(ws) and doc.worktree.path not in _worktrees(ws)


def test_parked_at_a_first_human_gate_has_no_worktree_and_resumes_into_one(tmp_path: Path, ws: Path) -> None:
    base = git(ws, "rev-parse", "HEAD").strip()
    store, run_id, wt = _parked(tmp_path, ws)
    assert not wt.exists() and str(wt) not in _worktrees(ws)
    assert git(ws, "branch", "--list", "iterion/run/*").strip() == ""  # no branch either
    # the gate's boundaries are recorded anyway: the base tree, read without a checkout
    refs = RunRefs(ws, run_id)
    assert [str(b.label) for b in refs.boundaries()] == ["pre:gate:0", "pause:gate:0"]
    base_tree = git(ws, "rev-parse", f"{base}^{{tree}}").strip()
    assert {b.tree for b in refs.boundaries()} == {base_tree}

    r = resume(store, run_id, answers={"go": "true"})
    assert r.status is RunStatus.FINISHED, r.error
    _assert_finished_with_product(store, ws, run_id, base)
    labels = [str(b.label) for b in RunRefs(ws, run_id).boundaries()]
    assert labels[-2:] == ["pre:one:0", "nodes:one:0"]
    assert RunRefs(ws, run_id).boundaries()[-2].tree == base_tree  # made at the base, before the node ran


def test_finished_without_a_file_node_makes_only_the_branch(tmp_path: Path, ws: Path) -> None:
    base = git(ws, "rev-parse", "HEAD").strip()
    store, run_id, wt = _parked(tmp_path, ws)
    r = resume(store, run_id, answers={"go": "false"})
    assert r.status is RunStatus.FINISHED, r.error
    doc = store.load_run(run_id)
    assert doc.worktree is not None and not doc.worktree.created and not wt.exists()
    assert doc.final_commit == base and git(ws, "rev-parse", doc.worktree.branch).strip() == base
    assert git(ws, "for-each-ref", f"refs/iterion/runs/{run_id}/").strip()  # its boundaries are refs
    gc = run_cli("gc", "--older-than", "0s", "--store-dir", str(store.root), cwd=ws)
    assert gc.returncode == 0, gc.stderr + gc.stdout
    assert f"collected run {run_id}" in gc.stdout, gc.stdout
    # collected: its refs are found through the checkout it was to be added to, and deleted
    assert git(ws, "for-each-ref", f"refs/iterion/runs/{run_id}/").strip() == ""


def test_cancel_before_the_first_node_leaves_no_worktree(tmp_path: Path, ws: Path) -> None:
    store, run_id, wt = _parked(tmp_path, ws)
    out = run_cli("cancel", "--run-id", run_id, "--store-dir", str(store.root), cwd=ws)
    assert out.returncode == 0, out.stderr
    doc = store.load_run(run_id)
    assert doc.status is RunStatus.CANCELLED
    assert not wt.exists() and str(wt) not in _worktrees(ws)
    assert doc.worktree is not None and not doc.worktree.created
    assert git(ws, "for-each-ref", f"refs/iterion/runs/{run_id}/").strip()  # its boundaries are refs
    gc = run_cli("gc", "--dry-run", "--json", "--store-dir", str(store.root), cwd=ws)
    assert gc.returncode == 0 and '"kept_worktrees": []' in gc.stdout, gc.stderr + gc.stdout


def test_rewind_of_a_run_that_never_made_its_worktree(tmp_path: Path, ws: Path) -> None:
    base = git(ws, "rev-parse", "HEAD").strip()
    store, run_id, wt = _parked(tmp_path, ws)
    out = run_cli("rewind", "--run-id", run_id, "--node", "gate", "--store-dir", str(store.root), cwd=ws)
    assert out.returncode == 0, out.stderr + out.stdout
    doc = store.load_run(run_id)
    # the replay needs somewhere to run: the rewind made the checkout, at the base, and recorded it
    assert doc.worktree is not None and doc.worktree.created and wt.is_dir()
    assert git(wt, "status", "--porcelain").strip() == "" and git(wt, "rev-parse", "HEAD").strip() == base
    r = resume(store, run_id)
    if r.status is RunStatus.PAUSED_WAITING_HUMAN:
        r = resume(store, run_id, answers={"go": "true"})
    assert r.status is RunStatus.FINISHED, r.error
    _assert_finished_with_product(store, ws, run_id, base)


# -- SIGKILL during the creation -----------------------------------------------------------------
# A `git` on PATH that does part of `git worktree add -q -b BRANCH PATH BASE` (or all of it), then
# SIGKILLs the process that ran it (its parent): the kill lands at a known point of the creation.
SHIM = """#!/bin/bash
if [ "$1" = "worktree" ] && [ "$2" = "add" ] && [ -n "$LAZYWT_KILL" ]; then
  case "$LAZYWT_KILL" in
    branch) "$REAL_GIT" branch "$5" "$7" ;;
    partial) "$REAL_GIT" "$@"; rm -f "$("$REAL_GIT" -C "$6" rev-parse --git-dir)/index"; rm -f "$6/README.md" ;;
    whole) "$REAL_GIT" "$@" ;;
  esac
  kill -9 $PPID
  exit 1
fi
exec "$REAL_GIT" "$@"
"""


@pytest.mark.parametrize("point", ["branch", "partial", "whole"])
def test_sigkill_during_the_creation_resumes_and_loses_nothing(tmp_path: Path, ws: Path, point: str) -> None:
    real = shutil.which("git")
    assert real, "git is needed"
    base = git(ws, "rev-parse", "HEAD").strip()
    store, run_id, wt = _parked(tmp_path, ws)
    bindir = tmp_path / "shim"
    bindir.mkdir()
    shim = bindir / "git"
    shim.write_text(SHIM)
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "REAL_GIT": real, "LAZYWT_KILL": point}
    killed = run_cli("resume", "--run-id", run_id, "--answer", "go=true", "--store-dir", str(store.root),
                     cwd=ws, env=env)
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    doc = store.load_run(run_id)
    assert doc.worktree is not None and not doc.worktree.created  # recorded only after the add
    # a plain resume takes the dead process's run over and makes the checkout again
    done = run_cli("resume", "--run-id", run_id, "--store-dir", str(store.root), cwd=ws)
    if store.load_run(run_id).status is RunStatus.PAUSED_WAITING_HUMAN:
        done = run_cli("resume", "--run-id", run_id, "--answer", "go=true", "--store-dir", str(store.root), cwd=ws)
    assert done.returncode == 0, done.stderr + done.stdout
    _assert_finished_with_product(store, ws, run_id, base)


def test_a_branch_made_by_someone_else_meanwhile_is_refused_not_taken(tmp_path: Path, ws: Path) -> None:
    store, run_id, _ = _parked(tmp_path, ws)
    doc = store.load_run(run_id)
    assert doc.worktree is not None
    (ws / "mine.txt").write_text("mine\n")
    git(ws, "add", "mine.txt")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "mine")
    git(ws, "branch", doc.worktree.branch)  # someone's branch, ahead of the run's base
    r = resume(store, run_id, answers={"go": "true"})
    assert r.status is not RunStatus.FINISHED
    assert "created by someone else" in (r.error or "")
    assert git(ws, "show", f"{doc.worktree.branch}:mine.txt") == "mine\n"  # left as it was


def test_old_documents_read_as_created_and_the_node_rule() -> None:
    old = WorktreeInfo.model_validate({"path": "/x", "branch": "b", "base_commit": "c" * 40})
    assert old.created and not old.absent
    assert WorktreeInfo(path="/x", branch="b", base_commit="c", created=False).absent

    def node(kind: NodeKind, **kw: object) -> Node:
        n = Node.__new__(Node)
        object.__setattr__(n, "kind", kind)
        for k, v in {"mode": None, "interaction": None, **kw}.items():
            object.__setattr__(n, k, v)
        return n

    assert not needs_workspace(node(NodeKind.HUMAN))
    assert not needs_workspace(node(NodeKind.HUMAN, interaction="human"))
    assert needs_workspace(node(NodeKind.HUMAN, interaction="llm"))
    assert not needs_workspace(node(NodeKind.ROUTER, mode=RouterMode.CONDITION))
    assert needs_workspace(node(NodeKind.ROUTER, mode=RouterMode.LLM))
    assert not needs_workspace(node(NodeKind.FAIL))
    for kind in (NodeKind.AGENT, NodeKind.JUDGE, NodeKind.TOOL, NodeKind.COMPUTE):
        assert needs_workspace(node(kind))
