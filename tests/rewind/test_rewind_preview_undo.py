"""`rewind --dry-run` reports what the real rewind then does, field by field, and
`rewind --undo` puts back the files and the checkpoint of the last rewind (issue 14 point 7).
All through the CLI in subprocesses, on a real repository."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from iterion.store import Store

from ..conftest import git, run_cli, store_fingerprint
from .test_rewind_e2e import cli, cli_json, first_attempt, setup_project

# every field of the files report but those only a real rewind has (the bank, the undo command,
# ``reverted``: whether files were changed, False in a preview by definition)
FIELDS = ("mechanism", "scope", "anchor", "restored", "removed", "skipped", "overwritten",
          "left_in_place", "left_in_place_details", "in_scope", "ref", "skip_reason", "raw_paths")


def _parked_with_edits(repo: Path, store: Path) -> str:
    setup_project(repo, worktree=False)
    run_id, _ = first_attempt(repo, store)
    # after the run stopped: a person edits a file the run produced (the restore overwrites it)
    # and one the run never touched (left in place)
    (repo / "c.txt").write_text("the user's own edit\n")
    (repo / "README.md").write_text("hello\nedited after the run stopped\n")
    return run_id


def test_dry_run_reports_exactly_what_the_rewind_does(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_id = _parked_with_edits(repo, store)
    ws_before = store_fingerprint(repo)
    # the human form says the same, with "would be"
    code, out, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "draft", "--dry-run")
    assert code == 0, err
    assert "would be overwritten c.txt" in out and "would be removed c.txt" in out
    assert "would be left in place README.md" in out
    preview = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "draft", "--dry-run")
    assert store_fingerprint(repo) == ws_before  # the previews wrote nothing to the workspace
    real = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    for name in FIELDS:
        assert preview["files"][name] == real["files"][name], name
    assert real["files"]["reverted"] and not preview["files"]["reverted"]
    assert real["files"]["overwritten"] == ["c.txt"]  # the user's edit: named by the preview too
    assert "README.md" in preview["files"]["left_in_place"]
    for name in ("to_node", "to_iteration", "dropped_nodes", "tombstoned_artifacts", "from_node"):
        assert preview[name] == real[name], name



def test_dry_run_reads_the_run_s_record_through_one_read_only_tracker(repo: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The pivots' check, the object check and the preview of a dry run share one tracker,
    opened read-only (iterion/rewind/lent.py): one state load, one repository, and not a byte
    of the store written; the report is the one the CLI gives."""
    from iterion.rewind.rewind import RewindRequest, rewind_run
    from workspacetrack import tracker as tracker_mod

    store = tmp_path / "store"
    run_id = _parked_with_edits(repo, store)
    expected = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "draft", "--dry-run")
    opened: list[object] = []
    real_init = tracker_mod.Tracker.__init__

    def counting(self: tracker_mod.Tracker, *args: object, **kwargs: object) -> None:
        opened.append(kwargs.get("scratch"))
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tracker_mod.Tracker, "__init__", counting)
    st = Store(store)
    before = store_fingerprint(store)
    result = rewind_run(st, RewindRequest(run_id=run_id, node="draft", dry_run=True))
    assert len(opened) == 1 and opened[0] is not None  # one tracker, with a scratch directory
    assert store_fingerprint(store) == before
    assert result.dry_run and result.files.overwritten == ["c.txt"]
    assert result.files.left_in_place == expected["files"]["left_in_place"]
    assert result.files.restored == expected["files"]["restored"]
    assert result.files.removed == expected["files"]["removed"]


def test_dry_run_is_the_rewind_on_a_worktree_run(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    setup_project(repo, worktree=True)
    run_id, ws = first_attempt(repo, store)
    (ws / "scratch.txt").write_text("triage notes\n")  # after the failure: work the run never recorded
    before = store_fingerprint(ws)
    preview = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "draft", "--dry-run")
    assert store_fingerprint(ws) == before
    real = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    for name in FIELDS:
        assert preview["files"][name] == real["files"][name], name
    assert real["files"]["overwritten"] == ["scratch.txt"] and "c.txt" in preview["files"]["removed"]
    assert preview["files"]["revert_commit"] is None and real["files"]["revert_commit"]


def test_undo_puts_back_files_and_checkpoint(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_id = _parked_with_edits(repo, store)
    name = Store(store).load_run(run_id).name
    ws_before = store_fingerprint(repo)
    cp_before = Store(store).load_checkpoint(run_id)
    doc_before = Store(store).load_run(run_id)

    code, out, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    assert code == 0, err
    assert f"undo this rewind with: iterion rewind --undo --run-id {name}" in out
    assert not (repo / "c.txt").exists()

    code, out, err = cli(repo, store, "rewind", "--undo", "--run-id", name)
    assert code == 0, err
    assert store_fingerprint(repo) == ws_before  # every file back as it was, the user's edit included
    cp = Store(store).load_checkpoint(run_id)
    assert cp is not None and cp_before is not None
    assert cp.model_dump(exclude={"written_at"}) == cp_before.model_dump(exclude={"written_at"})
    doc = Store(store).load_run(run_id)
    assert doc.status == doc_before.status and doc.explicit_resume_required == doc_before.explicit_resume_required

    # a second undo has nothing to undo: one line, exit 2
    code, out, err = cli(repo, store, "rewind", "--undo", "--run-id", name)
    assert code == 2 and err.startswith("error: ") and "no rewind to undo" in err and "Traceback" not in err


def test_undo_refused_once_the_run_moved_on(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_id = _parked_with_edits(repo, store)
    code, _, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    assert code == 0, err
    moved = cli_json(repo, store, "resume", "--run-id", run_id)
    assert moved["status"] != "paused_operator", moved
    ws_before, store_before = store_fingerprint(repo), store_fingerprint(store)
    code, out, err = cli(repo, store, "rewind", "--undo", "--run-id", run_id)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "moved on since its last rewind" in lines[0]
    assert store_fingerprint(repo) == ws_before and store_fingerprint(store) == store_before


def test_undo_takes_no_other_rewind_flag(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_id = _parked_with_edits(repo, store)
    code, _, err = cli(repo, store, "rewind", "--undo", "--run-id", run_id, "--node", "draft")
    assert code == 2 and "--undo takes only --run-id" in err
    out = json.loads(cli(repo, store, "inspect", "--run-id", run_id, "--json")[1])
    assert out["status"] == "failed_resumable"


def test_undo_on_a_worktree_run(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    setup_project(repo, worktree=True)
    run_id, ws = first_attempt(repo, store)
    (ws / "scratch.txt").write_text("triage notes\n")
    before = {k: v for k, v in store_fingerprint(ws).items() if not k.startswith(".git")}
    head_before = git(ws, "rev-parse", "HEAD").strip()
    code, out, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    assert code == 0, err
    assert "undo this rewind with: iterion rewind --undo --run-id" in out and not (ws / "scratch.txt").exists()
    undone = cli_json(repo, store, "rewind", "--undo", "--run-id", run_id)
    assert "scratch.txt" in undone["files_restored"] and undone["status"] == "failed_resumable"
    after = {k: v for k, v in store_fingerprint(ws).items() if not k.startswith(".git")}
    assert after == before  # the tree as it stood, the untracked notes included
    assert git(ws, "rev-parse", "HEAD").strip() == head_before  # the revert commit is off the branch
    # and the run resumes from where it stood before the rewind: only `apply` runs again
    done = cli_json(repo, store, "resume", "--run-id", run_id)
    events = Store(store).read_events(run_id)
    undone_at = max(i for i, e in enumerate(events) if e.type == "run_rewind_undone")
    assert [e.node for e in events[undone_at:] if e.type == "node_started"] == ["apply"], done


def _undo_killed_at(repo: Path, store: Path, run_ref: str, point: str) -> None:
    proc = run_cli("rewind", "--undo", "--run-id", run_ref, "--store-dir", str(store), cwd=repo,
                   env={"ITERION_TEST_KILL_AT": point})
    assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, proc.stderr)


@pytest.mark.parametrize("point", ["undo-intent:1", "restore:1", "undo-checkpoint:1", "undo-event:1"])
def test_undo_killed_anywhere_is_finished_by_running_it_again(repo: Path, tmp_path: Path, point: str) -> None:
    store = tmp_path / "store"
    run_id = _parked_with_edits(repo, store)
    ws_before = store_fingerprint(repo)
    cp_before = Store(store).load_checkpoint(run_id)
    code, _, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    assert code == 0, err
    _undo_killed_at(repo, store, run_id, point)  # SIGKILL: no handler, no finally
    code, _, err = cli(repo, store, "rewind", "--undo", "--run-id", run_id)
    assert code == 0, (point, err)
    assert store_fingerprint(repo) == ws_before  # the tree an unkilled undo leaves
    cp = Store(store).load_checkpoint(run_id)
    assert cp is not None and cp_before is not None
    assert cp.model_dump(exclude={"written_at"}) == cp_before.model_dump(exclude={"written_at"})
    assert [e.type for e in Store(store).read_events(run_id)].count("run_rewind_undone") == 1
    code, _, err = cli(repo, store, "rewind", "--undo", "--run-id", run_id)  # done: nothing left to undo
    assert code == 2 and "no rewind to undo" in err


def test_undo_killed_after_moving_head_is_finished_on_a_worktree_run(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    setup_project(repo, worktree=True)
    run_id, ws = first_attempt(repo, store)
    (ws / "scratch.txt").write_text("triage notes\n")
    before = {k: v for k, v in store_fingerprint(ws).items() if not k.startswith(".git")}
    head_before = git(ws, "rev-parse", "HEAD").strip()
    code, _, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "draft")
    assert code == 0, err
    _undo_killed_at(repo, store, run_id, "undo-checkpoint:1")  # HEAD and the tree are already back
    code, _, err = cli(repo, store, "rewind", "--undo", "--run-id", run_id)
    assert code == 0, err
    assert {k: v for k, v in store_fingerprint(ws).items() if not k.startswith(".git")} == before
    assert git(ws, "rev-parse", "HEAD").strip() == head_before
