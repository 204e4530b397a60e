"""rewind_run on a real store and real repositories: the claim, the refusals, what is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ..conftest import git
from .rewind_runs import FLOW, fake_run, loop_steps

from iterion.rewind.errors import RewindError, UnknownNodeError
from iterion.rewind.files import RestoreScope
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.store import LockHeldError, RunStatus, StaleWriteError, StatusRefusedError, Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def test_rewind_to_a_node_restores_files_and_parks_the_run(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    (repo / "flow.bot").write_text(FLOW.replace("Write the release note.", "Write a GOOD release note."))
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))

    assert (res.to_node, res.from_node, res.dropped_nodes) == ("draft", "apply", ["draft", "apply"])
    assert res.files.mechanism == "gitrefs" and res.files.scope == "full"
    assert (repo / "a.txt").read_text() == "base\n" and not (repo / "c.txt").exists()
    # the edited source is protected from the revert
    assert "GOOD" in (repo / "flow.bot").read_text()
    after = store.load_run(doc.id)
    assert after.status is RunStatus.PAUSED_OPERATOR and after.explicit_resume_required
    assert after.version == doc.version + 2  # the claim, then the park
    cp = store.load_checkpoint(doc.id)
    assert cp is not None and cp.restart_node == "draft" and cp.restart_iteration == 1
    assert set(cp.outputs) == {"setup", "gate"}
    events = [e for e in store.read_events(doc.id) if e.type == "run_rewound"]
    assert len(events) == 1
    p = events[0].payload
    assert p["from_node"] == "apply" and p["to_node"] == "draft" and p["dropped_nodes"] == ["draft", "apply"]
    assert p["files_reverted"] is True and p["files_ref"].endswith("/pre/draft/0")
    assert p["files_revert_commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert p["files_backup_ref"].endswith("/rewind/draft/1") and p["files_skip_reason"] is None
    for key in ("tombstoned_artifacts", "orphaned_child_runs", "promoted_from", "files_overwritten",
                "files_left_in_place"):
        assert key in p


def test_dry_run_changes_nothing(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="gate", dry_run=True))
    assert res.dry_run and res.dropped_nodes == ["gate", "draft", "apply"]
    assert sorted(res.files.in_scope) == ["a.txt", "c.txt"]
    assert (repo / "c.txt").exists()
    assert store.load_run(doc.id).version == doc.version
    assert not [e for e in store.read_events(doc.id) if e.type == "run_rewound"]


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.FINISHED])
def test_refused_statuses(store: Store, repo: Path, status: RunStatus) -> None:
    doc = fake_run(store, repo, loop_steps(), status=status, restart="apply")
    with pytest.raises(StatusRefusedError, match=f"is {status.value}"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    assert (repo / "c.txt").exists()


@pytest.mark.parametrize("status", [RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.PAUSED_WAITING_HUMAN,
                                    RunStatus.QUEUED, RunStatus.PAUSED_OPERATOR])
def test_accepted_statuses(store: Store, repo: Path, status: RunStatus) -> None:
    doc = fake_run(store, repo, loop_steps(), status=status, restart="apply")
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="apply", restore_scope=RestoreScope.NONE))
    assert res.files.skip_reason and "none" in res.files.skip_reason
    assert store.load_run(doc.id).status is RunStatus.PAUSED_OPERATOR


def test_no_checkpoint(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, [], status=RunStatus.FAILED)
    store.paths(doc.id).checkpoint_json.unlink()
    with pytest.raises(RewindError, match=f"run {doc.id} has no checkpoint - nothing to rewind"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="setup"))


def test_unknown_and_unexecuted_nodes(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps()[:2], status=RunStatus.PAUSED_WAITING_HUMAN, restart="gate")
    with pytest.raises(UnknownNodeError, match="no node 'nope'"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="nope"))
    with pytest.raises(RewindError, match="node draft has not executed"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))


def test_produced_scope_refused_on_worktree_before_anything_changes(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    with pytest.raises(RewindError, match="refused on a worktree run"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="draft", restore_scope=RestoreScope.PRODUCED))
    assert store.load_run(doc.id).version == doc.version and (repo / "c.txt").exists()


LOCK_HOLDER = """
import sys, time
from iterion.store import Store
lock = Store(sys.argv[1]).lock(sys.argv[2])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_a_live_owner_holds_the_run(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(store.root), doc.id],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeldError, match="being executed by another process"):
            rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert (repo / "c.txt").exists()
    rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))  # released: now it goes through


def test_a_concurrent_writer_loses_the_claim(store: Store, repo: Path) -> None:
    """The claim is a CAS: a resume that read the document before the rewind claimed it is refused."""
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    stale = store.load_run(doc.id)  # what a concurrent resume read
    rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    stale.status = RunStatus.RUNNING
    with pytest.raises(StaleWriteError):
        store.save_run(stale, stale.version)


def test_in_place_empty_scope_says_so_and_restores_nothing(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps()[:3], status=RunStatus.CANCELLED, restart="apply", worktree=False)
    (repo / "README.md").write_text("a person's edit after the run stopped\n")
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    f = res.files
    assert f.mechanism == "workspacetrack" and f.scope == "produced"
    assert not f.reverted and f.restored == [] and f.removed == []
    assert f.skip_reason and "empty scope" in f.skip_reason
    assert (repo / "README.md").read_text() == "a person's edit after the run stopped\n"
    assert "README.md" in f.left_in_place
    p = [e for e in store.read_events(doc.id) if e.type == "run_rewound"][-1].payload
    assert p["files_reverted"] is False and "empty scope" in p["files_skip_reason"]


def test_in_place_full_scope_reverts_every_recorded_path_but_the_source(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), status=RunStatus.FAILED, restart="apply", worktree=False)
    (repo / "flow.bot").write_text(FLOW.replace("Write the release note.", "Edited."))
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="setup", restore_scope=RestoreScope.FULL))
    assert not (repo / "a.txt").exists() and not (repo / "c.txt").exists()
    assert (repo / "flow.bot").read_text().count("Edited.") == 1  # protected
    assert sorted(res.files.removed) == ["a.txt", "c.txt"] and res.files.backup_ref


def test_subbot_children_of_dropped_nodes_are_released(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    doc.subbot_children = {"setup": "child-setup", "apply": "child-apply"}
    store.save_run(doc, doc.version)
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="draft", restore_scope=RestoreScope.NONE))
    assert res.orphaned_child_runs == {"apply": "child-apply"}
    assert store.load_run(doc.id).subbot_children == {"setup": "child-setup"}
    p = [e for e in store.read_events(doc.id) if e.type == "run_rewound"][-1].payload
    assert p["orphaned_child_runs"] == ["child-apply"]


def test_rewinding_the_node_the_run_failed_inside_removes_its_debris(store: Store, repo: Path) -> None:
    """The fail: boundary is what makes a stopped node's own debris part of its rewind's scope."""
    doc = fake_run(store, repo, loop_steps()[:3], restart="apply", worktree=False,
                   debris=lambda r: ((r / "c.txt").write_text("half\n"), (r / "a.txt").write_text("base\nhalf\n")))
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="apply"))
    assert (res.to_node, res.to_iteration, res.replay_iteration) == ("apply", 0, 0)
    assert res.dropped_nodes == ["apply"] and res.files.anchor == "pre:apply:0"
    assert not (repo / "c.txt").exists() and (repo / "a.txt").read_text() == "base\n"
    cp = store.load_checkpoint(doc.id)
    assert cp is not None and [e.node for e in cp.executed] == ["setup", "gate", "draft"]
    assert cp.outputs.keys() == {"setup", "gate", "draft"} and cp.came_from is None


def test_a_run_that_failed_inside_its_first_node_rewinds_to_it(store: Store, repo: Path) -> None:
    """Nothing completed, but a checkpoint exists and the first node started: its rewind removes
    that node's debris (it used to be refused as "no checkpoint - nothing to rewind")."""
    (repo / "a.txt").write_text("base\n")
    doc = fake_run(store, repo, [], restart="setup", worktree=False,
                   debris=lambda r: ((r / "c.txt").write_text("half\n"), (r / "a.txt").write_text("base\nhalf\n")))
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="setup"))
    assert (res.to_node, res.to_iteration) == ("setup", 0) and res.files.anchor == "pre:setup:0"
    assert not (repo / "c.txt").exists() and (repo / "a.txt").read_text() == "base\n"
    cp = store.load_checkpoint(doc.id)
    assert cp is not None and cp.executed == [] and cp.restart_node == "setup"
    with pytest.raises(RewindError, match="node draft has not executed") as err:
        rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    assert err.value.hint == "executed so far: setup"
    # a run whose checkpoint has nothing started: refused, saying so (not "executed so far: ")
    idle = fake_run(store, repo, [], restart=None, worktree=False)
    with pytest.raises(RewindError, match="node setup has not executed") as err:
        rewind_run(store, RewindRequest(run_id=idle.id, node="setup"))
    assert err.value.hint == "no node has executed in this run yet"


def test_a_second_rewind_before_any_resume_goes_back_to_the_same_anchor(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply", worktree=False)
    first = rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    (repo / "c.txt").write_text("written by hand after the first rewind\n")
    second = rewind_run(store, RewindRequest(run_id=doc.id, node="draft", restore_scope=RestoreScope.FULL))
    assert first.files.anchor == second.files.anchor == "pre:draft:0"
    assert not (repo / "c.txt").exists() and second.files.overwritten == ["c.txt"]
    assert store.load_checkpoint(doc.id).restart_node == "draft"  # type: ignore[union-attr]


def test_an_unrecorded_anchor_is_refused_before_the_claim(store: Store, repo: Path) -> None:
    doc = fake_run(store, repo, loop_steps(), restart="apply")
    git(repo, "update-ref", "-d", f"refs/iterion/runs/{doc.id}/pre/draft/0")
    with pytest.raises(RewindError, match="no workspace boundary pre:draft:0"):
        rewind_run(store, RewindRequest(run_id=doc.id, node="draft"))
    assert store.load_run(doc.id).version == doc.version and (repo / "c.txt").exists()
    res = rewind_run(store, RewindRequest(run_id=doc.id, node="draft", restore_scope=RestoreScope.NONE))
    assert res.files.skip_reason and (repo / "c.txt").exists()
