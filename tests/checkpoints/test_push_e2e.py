"""The recovery loop with real processes: `iterion run --push-checkpoints origin` parks, `inspect`
gives the hint, a fresh clone fetches exactly the recorded commit; the user's index never changes;
a later failed push leaves the hint on the last success; a failed worktree run's bank is restored
on a fresh clone by `iterion refs restore-bank`."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import (
    GATE,
    fetch_in_clone,
    fresh_clone,
    git,
    index_digest,
    inspect_json,
    reject_pushes,
    run_cli,
    write_bot,
)


def test_in_place_run_pushes_at_the_gate_and_a_failed_push_keeps_the_last_success(
        tmp_path: Path, ws: Path, origin: Path) -> None:
    bot = write_bot(tmp_path / "src", GATE)
    store_dir = tmp_path / "store"
    index0 = index_digest(ws)
    head0 = git(ws, "rev-parse", "HEAD").strip()
    branches0 = git(ws, "for-each-ref", "refs/heads")
    proc = run_cli("run", str(bot), "--push-checkpoints", "origin", "--store-dir", str(store_dir), "--json", cwd=ws)
    assert proc.returncode == 4, proc.stderr  # parked at the gate
    run_id = json.loads(proc.stdout)["run_id"]
    assert index_digest(ws) == index0  # the export never goes through the user's index

    hint = inspect_json(store_dir, run_id, ws)["workspace_checkpoint"]
    assert hint["ref"] == f"refs/iterion/runs/{run_id}/checkpoints/1"
    assert hint["source"] == "run_workspace_checkpoint" and hint["commit"] in hint["verify"]
    assert hint["fetch_command"] == f"git fetch origin {hint['ref']}"
    clone = fresh_clone(origin, tmp_path / "clone")
    assert fetch_in_clone(clone, hint["fetch_command"]) == hint["commit"]
    # the commit is the workspace as the gate saw it, on top of the user's HEAD
    assert git(clone, "show", "FETCH_HEAD:made.txt") == "made\n"
    assert git(clone, "show", "FETCH_HEAD:README.md") == "hello\nmore\n"
    assert git(clone, "rev-parse", "FETCH_HEAD^").strip() == head0
    # index, HEAD and branches of the user's checkout untouched; no ref written there
    assert index_digest(ws) == index0
    assert git(ws, "rev-parse", "HEAD").strip() == head0
    assert git(ws, "for-each-ref", "refs/heads") == branches0
    # no ref written there but the tracker's pin of the git blobs it recorded by reference
    assert all(line.split("\t")[1].startswith("refs/iterion/pins/")
               for line in git(ws, "for-each-ref", "refs/iterion").splitlines())

    text = run_cli("inspect", "--run-id", run_id, "--store-dir", str(store_dir), cwd=ws)
    assert hint["fetch_command"] in text.stdout and hint["commit"] in text.stdout

    reject_pushes(origin)
    proc = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", "--store-dir", str(store_dir),
                   "--json", cwd=ws)
    assert proc.returncode == 0, proc.stderr  # a failed push never fails the run
    detail = run_cli("inspect", "--run-id", run_id, "--events", "--json", "--store-dir", str(store_dir), cwd=ws)
    data = json.loads(detail.stdout)
    failed = [e for e in data["events"] if e["type"] == "run_workspace_checkpoint_failed"]
    assert failed and "origin is read-only" in failed[-1]["payload"]["error"]
    assert failed[-1]["payload"]["ref"] == f"refs/iterion/runs/{run_id}/checkpoints/2"
    assert data["workspace_checkpoint"] == hint  # still the last success
    assert index_digest(ws) == index0


def test_worktree_run_pushes_at_the_gate_then_banks_its_failure_for_restore_bank(
        tmp_path: Path, ws: Path, origin: Path) -> None:
    bot = write_bot(tmp_path / "src", GATE.replace("  entry: make\n", "  entry: make\n  worktree: auto\n")
                    .replace('echo after > after.txt"', 'echo after > after.txt && exit 3"'))
    store_dir = tmp_path / "store"
    index0 = index_digest(ws)
    proc = run_cli("run", str(bot), "--push-checkpoints", "origin", "--store-dir", str(store_dir), "--json", cwd=ws)
    assert proc.returncode == 4, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    hint = inspect_json(store_dir, run_id, ws)["workspace_checkpoint"]
    clone = fresh_clone(origin, tmp_path / "clone")
    assert fetch_in_clone(clone, hint["fetch_command"]) == hint["commit"]
    # a worktree run pushes its boundary commit: the pause boundary
    assert "Iterion-Kind: pause" in git(clone, "log", "-1", "--format=%B", "FETCH_HEAD")
    assert git(clone, "show", "FETCH_HEAD:made.txt") == "made\n"

    proc = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", "--store-dir", str(store_dir),
                   "--json", cwd=ws)
    assert proc.returncode == 5, proc.stderr  # after failed: failed_resumable
    result = json.loads(proc.stdout)
    detail = inspect_json(store_dir, run_id, ws)
    assert (result["final_branch"], result["final_commit"]) == (detail["final_branch"], detail["final_commit"])
    base = detail["worktree"]["base_commit"]
    assert detail["final_branch"] == detail["worktree"]["branch"]
    final = detail["final_commit"]
    assert git(ws, "rev-parse", detail["final_branch"]).strip() == final
    bank = detail["workspace_checkpoint"]
    assert bank["commit"] == final and bank["ref"].endswith("/checkpoints/2")
    assert index_digest(ws) == index0  # the user's index: untouched by the worktree run

    fresh = fresh_clone(origin, tmp_path / "fresh")
    git(fresh, "checkout", "-q", "main")
    proc = run_cli("refs", "restore-bank", "--ref", bank["ref"], "--head", final, "--base", base,
                   "--repo", str(fresh), "--json", cwd=fresh)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["restored"] is True
    assert git(fresh, "rev-parse", "HEAD").strip() == final
    assert (fresh / "after.txt").read_text() == "after\n" and (fresh / "made.txt").read_text() == "made\n"
    assert git(fresh, "status", "--porcelain") == ""
