"""Workspace boundaries around every node, for in-place runs (workspacetrack) and worktree runs (gitrefs)."""

from __future__ import annotations

from pathlib import Path

from gitrefs import RunRefs
from iterion.engine.versioning import open_run_versioning
from iterion.store import RunStatus, Store
from workspacetrack.tracker import Tracker

from .conftest import git, launch, labels, write_bot

THREE = """
tool one:
  command: "echo one > one.txt && echo edited >> README.md"

tool two:
  command: "mkdir -p sub && echo two > sub/two.txt && rm one.txt"

tool three:
  command: "echo three > three.txt"

workflow three_edits:
  entry: one
  one -> two
  two -> three
  three -> done
"""

EXPECTED = ["pre:one:0", "nodes:one:0", "pre:two:0", "nodes:two:0", "pre:three:0", "nodes:three:0"]


def test_in_place_chain_holds_pre_and_nodes_for_each_node(tmp_path: Path, ws: Path, store: Store) -> None:
    index_before = (ws / ".git" / "index").read_bytes()
    head_before = git(ws, "rev-parse", "HEAD")
    r = launch(store, write_bot(tmp_path / "src", THREE), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert labels(store, r.run_id) == EXPECTED
    tracker = Tracker(store.track_dir(r.run_id), ws, r.run_id)
    chain = tracker.chain_entries()
    assert [str(c.label) for c in chain] == EXPECTED
    # pre is an alias of the previous boundary's state; nodes records the node's own product
    assert chain[2].state == chain[1].state and chain[4].state == chain[3].state
    scope = tracker.produced_scope(chain[2].label)  # from pre:two:0
    assert set(scope.paths) == {"one.txt", "sub/two.txt", "three.txt"}
    # the operator's index, HEAD and branch are untouched
    assert (ws / ".git" / "index").read_bytes() == index_before
    assert git(ws, "rev-parse", "HEAD") == head_before


def test_default_store_lives_in_the_git_directory_unseen_by_git_and_the_tracker(tmp_path: Path, ws: Path) -> None:
    store = Store.open(None, ws)  # the default layout: the store lives in the repository's git directory
    assert store.root == (ws / ".git" / "iterion" / "store").resolve()
    r = launch(store, write_bot(tmp_path / "src", THREE), ws)
    assert r.status is RunStatus.FINISHED, r.error
    status = git(ws, "status", "--porcelain", "--untracked-files=all")
    assert "iterion" not in status and not (ws / ".iterion").exists()
    tracker = Tracker(store.track_dir(r.run_id), ws, r.run_id)
    last = tracker.chain_entries()[-1].state
    paths = set(tracker.manifest(last).entries)
    assert not any(p.startswith((".iterion", ".git")) for p in paths)
    assert "three.txt" in paths


def test_worktree_run_boundaries_final_branch_and_fast_forward(tmp_path: Path, ws: Path) -> None:
    store = Store.open(None, ws)
    bot = write_bot(tmp_path / "src", THREE.replace("  entry: one", "  entry: one\n  worktree: auto"))
    index_before = (ws / ".git" / "index").read_bytes()
    base = git(ws, "rev-parse", "HEAD").strip()
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    doc = store.load_run(r.run_id)
    assert doc.workspace_mode.value == "worktree" and doc.worktree is not None
    wt = Path(doc.worktree.path)
    assert wt.is_relative_to(store.root) and (wt / "three.txt").exists()
    assert doc.worktree.branch == f"iterion/run/{doc.name}" and doc.worktree.base_commit == base
    refs = RunRefs(wt, r.run_id)
    assert [str(b.label) for b in refs.boundaries()] == EXPECTED
    assert labels(store, r.run_id) == EXPECTED
    # finished: the final tree is committed on the run's branch and main fast-forwarded to it
    assert r.final_branch == doc.worktree.branch and r.merged_into == "main"
    tip = git(ws, "rev-parse", doc.worktree.branch).strip()
    assert git(ws, "rev-parse", "main").strip() == tip
    assert git(ws, "show", f"{tip}:three.txt") == "three\n"
    assert (ws / "three.txt").read_text() == "three\n"  # the operator's checkout got the fast-forward
    assert (ws / ".git" / "index").read_bytes() != index_before  # (the ff-merge is the one index change)
    versioning = open_run_versioning(store, doc, start=False, watch=False)
    assert versioning.mechanism == "gitrefs" and versioning.labels() == EXPECTED


def test_worktree_run_with_no_auto_merge_leaves_the_branch_alone(tmp_path: Path, ws: Path) -> None:
    store = Store.open(None, ws)
    bot = write_bot(tmp_path / "src", THREE.replace("  entry: one", "  entry: one\n  worktree: auto"))
    base = git(ws, "rev-parse", "HEAD").strip()
    r = launch(store, bot, ws, auto_merge=False, branch_name="feature/bot")
    assert r.status is RunStatus.FINISHED, r.error
    assert r.final_branch == "feature/bot" and r.merged_into is None
    assert git(ws, "rev-parse", "main").strip() == base
    assert git(ws, "show", "feature/bot:sub/two.txt") == "two\n"
    assert not (ws / "three.txt").exists()


def test_worktree_run_pauses_and_resumes_in_its_worktree(tmp_path: Path, ws: Path) -> None:
    from .conftest import resume

    store = Store.open(None, ws)
    bot = write_bot(tmp_path / "src", """
        schema ok:
          go: bool

        tool one:
          command: "echo one > one.txt"

        human gate:
          output: ok

        tool two:
          command: "echo two > two.txt"

        workflow wt:
          entry: one
          worktree: auto
          one -> gate
          gate -> two when go
          gate -> done when not go
          two -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    wt = Path(store.load_run(r.run_id).worktree.path)
    (wt / "person.txt").write_text("edited during the pause\n")  # a person's edit while parked
    r2 = resume(store, r.run_id, answers={"go": "true"})
    assert r2.status is RunStatus.FINISHED, r2.error
    labs = [str(b.label) for b in RunRefs(wt, r.run_id).boundaries()]
    assert labs == ["pre:one:0", "nodes:one:0", "pre:gate:0", "pause:gate:0", "resume:gate:0", "nodes:gate:0",
                    "pre:two:0", "nodes:two:0"]
    scope = RunRefs(wt, r.run_id).produced_scope(RunRefs(wt, r.run_id).boundaries()[2].label)
    assert "two.txt" in scope.paths and "person.txt" not in scope.paths  # the pause interval is excluded
    assert git(ws, "show", "main:two.txt") == "two\n"


def test_in_place_run_in_a_directory_that_is_not_a_repository(tmp_path: Path, store: Store) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    r = launch(store, write_bot(tmp_path / "src", THREE), plain)
    assert r.status is RunStatus.FINISHED, r.error
    assert labels(store, r.run_id) == EXPECTED
    assert (plain / "sub" / "two.txt").read_text() == "two\n"


def test_worktree_run_outside_a_repository_is_refused_before_creating_a_run(tmp_path: Path, store: Store) -> None:
    import pytest

    from iterion.engine.errors import EngineError

    plain = tmp_path / "plain"
    plain.mkdir()
    bot = write_bot(tmp_path / "src", THREE.replace("  entry: one", "  entry: one\n  worktree: auto"))
    with pytest.raises(EngineError, match="needs a git repository"):
        launch(store, bot, plain)
    assert store.list_runs() == []
