"""Clone per claim: a queued run bound to a repository executes in a fresh clone of it.

The per-run directory ``<work dir>/<run token>`` is removed before cloning and again when the run
returns, so every attempt starts from a pristine checkout of the run's ref: the checkpoint restores
outputs, not files. A re-execution (the run has a checkpoint) then:

1. emits ``run_workspace_reset`` (the discarded tree is visible on the timeline), keyed on the
   checkpoint's existence, not on the delivery's kind;
2. restores what the earlier attempt left on the forge: the death bank (``final_branch`` /
   ``final_commit`` on the run document), else the newest checkpoint ref a pause, a failure, an
   interrupted delivery or a periodic push recorded (``run_workspace_checkpoint`` events), with
   the two-step restore of ``gitrefs.bank_restore`` (the chain's base, then a fast-forward to its
   head), and emits ``run_workspace_bank_restored {branch, head, base, ref, restored, reason}``.
   A bank that moved past the recorded head, or a chain with no common ancestor, is refused
   (``restored: false`` + reason) and the run continues on the fresh clone.

The base is the commit the FIRST claim's clone started from, recorded on its
``run_delivery_claimed`` event (``base``): the target branch may have gained commits since.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitrefs.persist import UserError
from iterion.store import Store
from iterion.store import events as ev
from iterion.store.jetstream.store import run_token

CLONE_TIMEOUT_S = 600.0


class CloneError(UserError):
    """The repository could not be cloned (a bad URL, an unknown ref, no access)."""


class RepoMissingError(CloneError):
    """The repository answered that it (or the run's ref) does not exist: every later delivery
    would get the same answer, so the run fails at the first one (FailureCode.REPO_NOT_FOUND)."""


# what git prints when the repository itself is not there (a path, a 404, an unknown ssh path);
# a host that does not answer, a refused connection or a timeout stay transient
_MISSING = ("does not exist", "does not appear to be a git repository", "repository not found",
            "not found", "not a git repository")
_TRANSIENT = ("could not resolve", "failed to connect", "connection refused", "timed out", "couldn't connect",
              "temporary failure", "early eof", "the remote end hung up", "http 5", "error: 5")


def _missing_repository(message: str) -> bool:
    low = message.lower()
    return any(m in low for m in _MISSING) and not any(t in low for t in _TRANSIENT)


def run_dir_for(work_dir: Path, run_id: str) -> Path:
    return Path(work_dir) / run_token(run_id)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _git(args: list[str], cwd: Path | None = None, *, check: bool = True) -> str:
    from gitrefs.gitcli import git_env

    env = git_env()
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env["GIT_TERMINAL_PROMPT"] = "0"
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=False,
                          timeout=CLONE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 and check:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise CloneError(f"git {args[0]} failed: {'; '.join(lines)[:400] or f'exit {proc.returncode}'}",
                         hint="check the repository URL and ref, and that this runner can read it")
    return proc.stdout.strip()


@dataclass(frozen=True)
class Clone:
    path: Path
    base: str  # the commit the checkout started at


def fresh_clone(work_dir: Path, run_id: str, repo_url: str, ref: str | None) -> Clone:
    """``repo_url`` at ``ref`` (a branch, a tag or a commit; default: its HEAD) in a fresh directory."""
    dest = run_dir_for(work_dir, run_id)
    remove(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        _git(["clone", "--quiet", "--", repo_url, str(dest)])
    except CloneError as exc:
        if _missing_repository(exc.message or ""):
            raise RepoMissingError(f"repository {repo_url} does not exist ({exc.message})",
                                   hint="queue the run again with the right --repo") from None
        raise
    if ref and not _has_ref(dest, ref):
        raise RepoMissingError(f"ref {ref} does not exist in repository {repo_url}",
                               hint="queue the run again with an existing branch, tag or commit (--ref)")
    if ref:
        _git(["checkout", "--quiet", ref, "--"], cwd=dest)
    # commits the run makes (a bank, a restore) need an identity; the clone's own config only
    _git(["config", "user.name", "iterion runner"], cwd=dest)
    _git(["config", "user.email", "runner@iterion.invalid"], cwd=dest)
    return Clone(dest, _git(["rev-parse", "HEAD"], cwd=dest))


def _has_ref(clone: Path, ref: str) -> bool:
    """``ref`` names a commit in the fresh clone: itself (a tag, a commit, the default branch) or
    as the remote's branch (what ``git checkout BRANCH`` would track)."""
    if ref.startswith("-"):
        return False
    for candidate in (ref, f"origin/{ref}"):
        if _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], cwd=clone, check=False):
            return True
    return False


def recorded_base(store: Store, run_id: str) -> str | None:
    for e in store.read_events(run_id):
        base = ev.payload(e, ev.RunDeliveryClaimedPayload).get("base")
        if e.type == ev.RUN_DELIVERY_CLAIMED and isinstance(base, str):
            return base
    return None


def _bank(store: Store, run_id: str) -> tuple[str, str, str] | None:
    """(ref on the forge, its recorded head, where it came from) of the newest bank, or None."""
    doc = store.load_run(run_id)
    events = store.read_events(run_id)
    if doc.final_commit:
        # an in-place run's death bank is its pushed export: find the ref it was pushed under
        for e in reversed(events):
            pushed = ev.payload(e, ev.RunWorkspaceCheckpointPayload)
            if e.type == ev.RUN_WORKSPACE_CHECKPOINT and pushed.get("commit") == doc.final_commit \
                    and isinstance(pushed.get("ref"), str):
                return str(pushed.get("ref")), doc.final_commit, "final_commit"
        if doc.final_branch:
            ref = doc.final_branch if doc.final_branch.startswith("refs/") else f"refs/heads/{doc.final_branch}"
            return ref, doc.final_commit, "final_branch"
    last: ev.RunWorkspaceCheckpointPayload | None = None
    for e in events:
        pushed = ev.payload(e, ev.RunWorkspaceCheckpointPayload)
        if e.type == ev.RUN_WORKSPACE_CHECKPOINT and pushed.get("ref") and pushed.get("commit"):
            last = pushed
    if last is None:
        return None
    return str(last.get("ref")), str(last.get("commit")), "checkpoint"


def reset_and_restore(store: Store, run_id: str, clone: Clone) -> dict[str, Any] | None:
    """On a re-execution: ``run_workspace_reset``, then the bank restore (see the module doc).
    Returns the restore event's payload (None when the run has no checkpoint: a first attempt)."""
    from gitrefs.bank_restore import restore_bank

    if store.load_checkpoint(run_id) is None:
        return None
    store.append_event(run_id, ev.RUN_WORKSPACE_RESET, payload={
        "workspace": str(clone.path), "clone_head": clone.base,
        "reason": "a re-execution starts from a fresh clone: files the earlier attempt did not push are gone"})
    bank = _bank(store, run_id)
    base = recorded_base(store, run_id) or clone.base
    if bank is None:
        payload: dict[str, Any] = {"restored": False, "reason": "no bank or checkpoint was pushed by an earlier attempt",
                                   "branch": None, "ref": None, "head": None, "base": base}
    else:
        ref, head, source = bank
        try:
            result = restore_bank(clone.path, "origin", ref, head, base)
            payload = {"restored": result.restored, "reason": result.reason, "branch": result.branch,
                       "ref": ref, "head": head, "base": base, "source": source}
        except Exception as exc:  # noqa: BLE001 - a refused restore is reported, the run goes on
            payload = {"restored": False, "reason": f"{type(exc).__name__}: {exc}"[:400], "branch": None,
                       "ref": ref, "head": head, "base": base, "source": source}
    store.append_event(run_id, ev.RUN_WORKSPACE_BANK_RESTORED, payload=payload)
    return payload
