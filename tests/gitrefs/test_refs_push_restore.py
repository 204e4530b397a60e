"""Workspace checkpoint pushes, the recovery hint, and restoring a bank onto a fresh clone."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from .refs_helpers import git, guarded_state, make_repo

from gitrefs import MissingRemote, PushFailed, RunRefs, restore_bank
from gitrefs.boundary import BoundaryLabel

L = BoundaryLabel.parse


@pytest.fixture
def remote(tmp_path: Path, repo: Path) -> Path:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    return bare


def _run_with_two_boundaries(repo: Path) -> RunRefs:
    rr = RunRefs.start(repo, "r1")
    rr.write_boundary(L("pre:a:0"))
    (repo / "a.txt").write_text("a")
    rr.write_boundary(L("nodes:a:0"))
    rr.write_boundary(L("pre:b:0"))
    (repo / "b.txt").write_text("b")
    rr.write_boundary(L("nodes:b:0"))
    return rr


def _block_pushes(bare: Path, blocked: bool) -> None:
    hook = bare / "hooks" / "pre-receive"
    if blocked:
        hook.write_text("#!/bin/sh\necho 'checkpoints are frozen' >&2\nexit 1\n")
        hook.chmod(0o755)
    else:
        hook.unlink(missing_ok=True)


def test_push_records_and_latest_success_survives_a_failed_push(repo: Path, remote: Path) -> None:
    rr = _run_with_two_boundaries(repo)
    assert rr.recovery_hint() is None  # nothing pushed: no ref is invented
    before = guarded_state(repo)
    first = rr.push("origin", "nodes:a:0")
    bank = rr.bank("a")
    second = rr.push("origin", bank)
    assert guarded_state(repo) == before
    assert (first.sequence, second.sequence) == (1, 2)
    assert first.ref == "refs/iterion/runs/r1/checkpoints/1"
    assert git(remote, "rev-parse", first.ref).strip() == rr.resolve(L("nodes:a:0"))
    assert git(remote, "rev-parse", second.ref).strip() == bank.commit

    _block_pushes(remote, True)
    with pytest.raises(PushFailed, match="pre-receive hook declined|frozen"):
        rr.push("origin", "nodes:b:0")
    hint = rr.recovery_hint()
    assert hint is not None
    assert (hint.ref, hint.commit, hint.sequence) == (second.ref, bank.commit, 2)
    attempts = rr.push_log().attempts
    assert [a.ok for a in attempts] == [True, True, False] and attempts[-1].error


def test_recovery_hint_fetch_command_works_in_a_fresh_clone(repo: Path, remote: Path, tmp_path: Path) -> None:
    rr = _run_with_two_boundaries(repo)
    rec = rr.push("origin", "nodes:b:0")
    hint = rr.recovery_hint()
    assert hint is not None and hint.commit == rec.commit
    assert hint.fetch_command == f"git fetch origin {rec.ref}"
    assert hint.verify_command == "git rev-parse FETCH_HEAD"
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    subprocess.run(shlex.split(hint.fetch_command), cwd=clone, check=True, capture_output=True)
    assert git(clone, *shlex.split(hint.verify_command)[1:]).strip() == hint.commit
    assert git(clone, "show", f"{hint.commit}:b.txt") == "b"


def test_push_to_missing_remote_is_refused(repo: Path) -> None:
    rr = _run_with_two_boundaries(repo)
    with pytest.raises(MissingRemote, match="no remote 'nowhere'"):
        rr.push("nowhere", "nodes:a:0")


def _clone_after_target_moved(repo: Path, remote: Path, tmp_path: Path) -> Path:
    # The target branch gains a commit meanwhile: the fresh clone's HEAD is not the run's base.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    (other / "upstream.txt").write_text("someone else's work")
    git(other, "add", "upstream.txt")
    git(other, "commit", "-q", "-m", "upstream")
    git(other, "push", "-q", "origin", "main")
    clone = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    return clone


def test_restore_bank_is_two_step_from_the_base(repo: Path, remote: Path, tmp_path: Path) -> None:
    rr = _run_with_two_boundaries(repo)
    head, base = rr.chain_head(), rr.base_commit()
    pushed = rr.push("origin", head)
    clone = _clone_after_target_moved(repo, remote, tmp_path)
    res = restore_bank(clone, "origin", pushed.ref, head, base)
    assert res.restored and res.reason is None and res.branch == "refs/heads/main"
    assert git(clone, "rev-parse", "HEAD").strip() == head
    assert (clone / "b.txt").read_text() == "b" and not (clone / "upstream.txt").exists()
    reflog = git(clone, "reflog", "-3", "--format=%H %gs").splitlines()
    assert reflog[0].startswith(head) and "fast-forward to the run's bank" in reflog[0]
    assert reflog[1].startswith(base) and "start from the run's base" in reflog[1]
    assert git(clone, "status", "--porcelain") == ""


def _untouched(clone: Path) -> dict[str, str]:
    state = guarded_state(clone)
    state["files"] = git(clone, "ls-files", "-s")
    state["status"] = git(clone, "status", "--porcelain", "--untracked-files=all")
    state["fetch_head"] = str((Path(git(clone, "rev-parse", "--absolute-git-dir")) / "FETCH_HEAD").exists())
    return state


def test_bank_that_moved_past_the_recorded_head_is_refused(repo: Path, remote: Path, tmp_path: Path) -> None:
    rr = _run_with_two_boundaries(repo)
    recorded = rr.resolve(L("nodes:a:0"))
    pushed = rr.push("origin", recorded)
    git(repo, "push", "-q", "-f", "origin", f"{rr.chain_head()}:{pushed.ref}")  # the bank moved on
    clone = _clone_after_target_moved(repo, remote, tmp_path)
    before = _untouched(clone)
    res = restore_bank(clone, "origin", pushed.ref, recorded, rr.base_commit())
    assert not res.restored and "moved past the recorded head" in (res.reason or "")
    assert _untouched(clone) == before


def test_bank_with_no_common_ancestor_is_refused(repo: Path, remote: Path, tmp_path: Path) -> None:
    stranger = make_repo(tmp_path / "stranger", commit=False)
    (stranger / "unrelated.txt").write_text("another project")
    git(stranger, "add", "unrelated.txt")
    git(stranger, "commit", "-q", "-m", "unrelated history")
    orphan = git(stranger, "rev-parse", "HEAD").strip()
    git(stranger, "push", "-q", str(remote), "HEAD:refs/iterion/runs/x/checkpoints/1")
    clone = _clone_after_target_moved(repo, remote, tmp_path)
    base = git(repo, "rev-parse", "main").strip()
    before = _untouched(clone)
    res = restore_bank(clone, "origin", "refs/iterion/runs/x/checkpoints/1", orphan, base)
    assert not res.restored and "no common ancestor" in (res.reason or "")
    assert _untouched(clone) == before


def test_restore_refuses_a_dirty_clone_and_a_missing_ref(repo: Path, remote: Path, tmp_path: Path) -> None:
    rr = _run_with_two_boundaries(repo)
    pushed = rr.push("origin", rr.chain_head())
    clone = _clone_after_target_moved(repo, remote, tmp_path)
    (clone / "wip.txt").write_text("work in progress")
    before = _untouched(clone)
    res = restore_bank(clone, "origin", pushed.ref, rr.chain_head(), rr.base_commit())
    assert not res.restored and "uncommitted changes" in (res.reason or "")
    missing = "refs/iterion/runs/r1/checkpoints/99"
    res = restore_bank(clone, "origin", missing, rr.chain_head(), rr.base_commit())
    assert not res.restored and "has no ref" in (res.reason or "")
    assert _untouched(clone) == before


def test_unborn_run_chain_can_be_pushed_and_fscked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commit=False)
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    rr = RunRefs.start(repo, "r")
    (repo / "f.txt").write_text("f")
    rr.write_boundary(L("nodes:a:0"))
    rec = rr.push(str(bare), "nodes:a:0")
    assert git(bare, "rev-parse", rec.ref).strip() == rr.chain_head()
    git(bare, "fsck", "--strict")
    git(repo, "fsck", "--strict")


def test_push_to_a_relative_path_resolves_against_the_workspace(repo: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path / "rel-remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    rr = _run_with_two_boundaries(repo)
    monkeypatch.chdir(tmp_path.parent)  # the caller's cwd is not the workspace
    rec = rr.push("../rel-remote.git", "nodes:a:0")
    assert git(bare, "rev-parse", rec.ref).strip() == rr.resolve(L("nodes:a:0"))
