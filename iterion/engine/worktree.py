"""`worktree: auto`: the run executes in a fresh git worktree under the store, on its own branch.

On ``finished`` the final tree is committed on that persistent branch and the operator's
branch is fast-forwarded to it when that is a pure fast-forward (never a merge commit, never
over local changes: ``git merge --ff-only`` refuses those and the branch is left as it was).

Retention (``release_finished_worktree``): once the final commit is recorded in the run
document and the run's branch holds it, the finished run's checkout is removed (a full checkout
per run: 73 MB at 10,000 files) and recorded ``released``. Nothing it produced becomes
unreachable: its boundaries are refs in the repository's common git directory
(``refs/iterion/runs/<run>/``), its final tree a commit on its branch; no command resumes or
rewinds a finished run. A failed, cancelled or parked run keeps its checkout (a resume runs
there); ``iterion gc`` reports those it keeps and removes those of collected runs.

Lazy creation: launch checks everything (a repository, a commit to branch from, a free branch
name), fixes the base commit and records the worktree ``created: false``; the checkout itself
(``git worktree add``) is made by ``materialize_worktree`` before the first node that needs the
workspace (``needs_workspace``), and ``created: true`` is recorded after it. A run that parks at
a first human gate, or is cancelled before any such node, never pays for a checkout. Until then
the run's tree is its base commit's: boundaries record that tree without reading a checkout
(``GitVersioning``), and every reader treats the absent checkout like a released one
(``WorktreeInfo.absent``). The creation is idempotent: a kill during ``git worktree add`` leaves
``created: false`` and at most a half-made directory and the branch at the base commit, which
the next attempt removes and reuses.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitrefs.persist.errors import ErrorKind
from iterion.engine.errors import EngineError

_IDENTITY = {
    "GIT_AUTHOR_NAME": "iterion", "GIT_AUTHOR_EMAIL": "iterion@localhost",
    "GIT_COMMITTER_NAME": "iterion", "GIT_COMMITTER_EMAIL": "iterion@localhost",
}


def git(cwd: Path, *args: str, check: bool = True, identity: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(_IDENTITY if identity else {})}
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise EngineError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip() or proc.stdout.strip()}",
                          exit_code=ErrorKind.REFUSED)
    return proc


@dataclass(frozen=True)
class CreatedWorktree:
    path: Path
    branch: str
    base_commit: str
    repo: Path  # the operator's checkout the worktree was added to


def needs_workspace(node: Any) -> bool:
    """Whether a node touches the run's files, so a lazily created worktree must exist before it.

    Not needed: a human gate answered by a person (it shows a question), a router that is not an
    LLM (it reads outputs, never files), a named fail node. Every other kind (agents, judges, LLM
    routers, tools, compute steps, subbots, and any kind added later) needs it."""
    from iterion.ir import NodeKind, RouterMode

    if node.kind is NodeKind.HUMAN:
        return getattr(node, "interaction", None) in ("llm", "llm_or_human")
    if node.kind is NodeKind.ROUTER:
        return node.mode is RouterMode.LLM
    return node.kind is not NodeKind.FAIL


def plan_worktree(repo_dir: Path, store_root: Path, run_id: str, branch: str) -> CreatedWorktree:
    """Every check ``git worktree add`` would fail on, and the base commit, without the checkout."""
    probe = git(repo_dir, "rev-parse", "--show-toplevel", check=False)
    if probe.returncode != 0:
        raise EngineError(f"`worktree: auto` needs a git repository, and {repo_dir} is not inside one",
                          hint="run from a git checkout, or set `worktree: none` to run in place")
    top = Path(probe.stdout.strip())
    head = git(top, "rev-parse", "--verify", "-q", "HEAD", check=False)
    if head.returncode != 0:
        raise EngineError(f"`worktree: auto` needs a commit to branch from, and {top} has none yet",
                          hint="make a first commit, or set `worktree: none` to run in place")
    base = head.stdout.strip()
    if git(top, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).returncode == 0:
        raise EngineError(f"branch {branch} already exists", hint="pass another --branch-name")
    path = (Path(store_root) / "worktrees" / run_id).resolve()
    return CreatedWorktree(path, branch, base, top)


def _is_complete_checkout(path: Path, branch: str, base: str) -> bool:
    """A finished ``git worktree add``: its own top, on ``branch`` at ``base``, nothing differing
    (nothing of the run ran there yet, so any difference is a checkout cut short)."""
    if not (path / ".git").exists():
        return False
    top = git(path, "rev-parse", "--show-toplevel", check=False)
    head = git(path, "symbolic-ref", "-q", "HEAD", check=False)
    at = git(path, "rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != path.resolve() \
            or head.stdout.strip() != f"refs/heads/{branch}" or at.stdout.strip() != base:
        return False
    status = git(path, "status", "--porcelain", "--untracked-files=all", check=False)
    return status.returncode == 0 and not status.stdout.strip()


def add_worktree(path: Path, branch: str, base: str, repo: Path) -> None:
    """``git worktree add``, idempotent: a complete checkout of ``branch`` at ``path`` is kept; a
    half-made one (a kill during the add) is removed and made again; the branch a killed add
    created is reused when it is still at ``base`` (a branch that moved on is someone's: refused)."""
    path = Path(path)
    if path.is_dir() and _is_complete_checkout(path, branch, base):
        return
    if path.exists():
        git(repo, "worktree", "remove", "--force", "--force", str(path), check=False)
        if path.exists():
            import shutil

            shutil.rmtree(path)
    git(repo, "worktree", "prune")
    path.parent.mkdir(parents=True, exist_ok=True)
    tip = git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}", check=False)
    if tip.returncode != 0:
        git(repo, "worktree", "add", "-q", "-b", branch, str(path), base)
        return
    if tip.stdout.strip() != base:
        raise EngineError(f"branch {branch} was created by someone else after the run started "
                          f"(it is at {tip.stdout.strip()[:12]}, the run's base is {base[:12]})",
                          hint=f"rename or delete branch {branch}, then resume the run")
    git(repo, "worktree", "add", "-q", str(path), branch)


def materialize_worktree(store: Any, run_id: str) -> Path:
    """Make a lazily planned worktree exist (see the module doc) and record ``created``; the path.
    Called with the run's lock held (the executing process)."""
    doc = store.load_run(run_id)
    wt = doc.worktree
    assert wt is not None
    path = Path(wt.path)
    if wt.created:
        return path
    repo = Path(doc.options.get("repo_dir") or path)
    add_worktree(path, wt.branch, wt.base_commit, repo)

    def mark(d: Any) -> None:
        if d.worktree is not None:
            d.worktree.created = True

    store.update_run(run_id, mark)  # after the add: a kill before this redoes an idempotent add
    return path


def commit_worktree(path: Path, message: str) -> str:
    """Commit the worktree's tree (untracked files included) on its branch when it changed; the
    branch's head. Only the run's own worktree and its index are written, never the user's."""
    path = Path(path)
    git(path, "add", "-A")
    if git(path, "diff", "--cached", "--quiet", check=False).returncode != 0:
        git(path, "commit", "-q", "--no-verify", "-m", message, identity=True)
    return git(path, "rev-parse", "HEAD").stdout.strip()


def finalize_worktree(path: Path, branch: str, repo_dir: Path, run_name: str, *, merge_into: str | None,
                      auto_merge: bool) -> dict[str, Any]:
    """Commit the final tree on the run's branch; fast-forward the target branch if possible."""
    final = commit_worktree(path, f"iterion: run {run_name} finished")
    out: dict[str, Any] = {"final_branch": branch, "final_commit": final, "merged_into": None}
    if not auto_merge:
        out["merge_skipped"] = "auto-merge disabled"
        return out
    current = git(repo_dir, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    target = merge_into or current
    if not target:
        out["merge_skipped"] = "the repository's HEAD is detached; pass --merge-into BRANCH"
        return out
    tip = git(repo_dir, "rev-parse", "--verify", "-q", f"refs/heads/{target}", check=False)
    if tip.returncode != 0:
        out["merge_skipped"] = f"branch {target} does not exist"
        return out
    old = tip.stdout.strip()
    if git(repo_dir, "merge-base", "--is-ancestor", old, final, check=False).returncode != 0:
        out["merge_skipped"] = f"{target} moved on since the run started: not a fast-forward, merge {branch} by hand"
        return out
    if target == current:
        ff = git(repo_dir, "merge", "--ff-only", "-q", final, check=False)
        if ff.returncode != 0:
            out["merge_skipped"] = f"fast-forward of {target} refused: {ff.stderr.strip()}"
            return out
    else:
        git(repo_dir, "update-ref", f"refs/heads/{target}", final, old)
    out["merged_into"] = target
    return out


def never_created_result(branch: str, base: str, repo_dir: Path) -> dict[str, Any]:
    """A run that finished without a node that needed its worktree: the branch is made at the
    base (the persistent branch a worktree run promises), nothing is committed or merged."""
    if git(repo_dir, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).returncode != 0:
        git(repo_dir, "branch", branch, base, check=False)
    return {"final_branch": branch, "final_commit": base, "merged_into": None,
            "merge_skipped": "no node needed the workspace: nothing changed"}


def release_finished_worktree(store: Any, run_id: str) -> str | None:
    """Remove a finished run's worktree once nothing in it is unrecorded (see the module doc);
    a warning when it is kept for a reason the person should know, else None. Best effort."""
    from iterion.store import RunStatus, WorkspaceMode
    from iterion.store.gc import remove_worktree

    doc = store.load_run(run_id)
    wt = doc.worktree
    if doc.status is not RunStatus.FINISHED or doc.workspace_mode is not WorkspaceMode.WORKTREE or wt is None \
            or wt.released:
        return None
    path = Path(wt.path)
    if not path.resolve().is_relative_to((Path(store.root) / "worktrees").resolve()) or not path.is_dir():
        return None  # a checkout iterion did not make under its store, or gone already: left alone
    final = doc.final_commit
    tip = git(path, "rev-parse", "--verify", "-q", f"refs/heads/{wt.branch}^{{commit}}", check=False)
    if not final or tip.returncode != 0 or git(path, "merge-base", "--is-ancestor", final,
                                               tip.stdout.strip(), check=False).returncode != 0:
        return f"the worktree {path} is kept: its final commit is not on branch {wt.branch}"
    dirty = git(path, "status", "--porcelain", "--untracked-files=all", check=False)
    if dirty.returncode != 0 or dirty.stdout.strip():
        return f"the worktree {path} is kept: it has changes after the run's final commit"

    def mark(d: Any) -> None:
        if d.worktree is not None:
            d.worktree.released = True

    # recorded first: a kill before the removal leaves a released worktree that still exists,
    # which rewind and gc both handle (the reverse would be a missing, unreleased one: an error)
    store.update_run(run_id, mark)
    problems: list[str] = []
    remove_worktree(path, problems)
    return f"the finished run's worktree {path} could not be removed: {problems[0]}" if problems else None
