"""Restoring a run's pushed bank onto a fresh clone: reset to the chain's base, then fast-forward.

Two steps, so the clone's reflog reads "started from the run's base" and only the run's own
commits come after it. Every check runs before anything moves: a refusal leaves HEAD, the
branches, the index and the working tree exactly as they were.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitrefs.gitcli import git_out, run_git
from gitrefs.records import BankRestoreResult
from gitrefs.remotes import check_remote
from gitrefs.workspace import open_workspace


def restore_bank(clone: Path | str, remote: str, ref: str, recorded_head: str,
                 base: str) -> BankRestoreResult:
    ws = open_workspace(clone)
    check_remote(ws, remote)
    root = ws.workdir
    branch = None if ws.repo.head_is_detached else ws.repo.references["HEAD"].target
    if isinstance(branch, pygit2.Oid):
        branch = None

    def refused(reason: str) -> BankRestoreResult:
        return BankRestoreResult(False, reason, branch, recorded_head, base)

    listed = git_out(root, ["ls-remote", "--", remote, ref]).splitlines()
    tips = [line.split("\t")[0] for line in listed if line.endswith("\t" + ref)]
    if not tips:
        return refused(f"{remote} has no ref {ref}")
    if tips[0] != recorded_head:
        return refused(f"bank ref {ref} moved past the recorded head: {remote} has {tips[0]}, "
                       f"the run recorded {recorded_head}")
    if git_out(root, ["status", "--porcelain", "--untracked-files=normal"]):
        return refused(f"the clone at {root} has uncommitted changes; restore into a fresh clone")
    # Objects only: no FETCH_HEAD, no ref, so a refusal below still changes nothing visible.
    run_git(root, ["fetch", "--quiet", "--no-write-fetch-head", "--", remote, ref])
    repo = ws.repo
    try:
        head_oid = repo[pygit2.Oid(hex=recorded_head)].peel(pygit2.Commit).id
        base_oid = repo[pygit2.Oid(hex=base)].peel(pygit2.Commit).id
    except (KeyError, ValueError):
        return refused(f"base {base} is not in the clone or the bank")
    if repo.merge_base(head_oid, base_oid) is None:
        return refused(f"the bank head {recorded_head} and the base {base} have no common ancestor")
    if head_oid != base_oid and not repo.descendant_of(head_oid, base_oid):
        return refused(f"the bank head {recorded_head} does not descend from the base {base}")
    if not repo.head_is_unborn and repo.merge_base(repo.head.target, head_oid) is None:
        return refused(f"the bank head {recorded_head} has no common ancestor with the clone's HEAD")
    run_git(root, ["reset", "--quiet", "--hard", base],
            env={"GIT_REFLOG_ACTION": f"iterion: start from the run's base {base}"})
    run_git(root, ["merge", "--quiet", "--ff-only", recorded_head],
            env={"GIT_REFLOG_ACTION": f"iterion: fast-forward to the run's bank {ref}"})
    return BankRestoreResult(True, None, branch, recorded_head, base)
