"""Pre-flight refusals of a resume, checked before anything is claimed or executed.

* a run parked on BUDGET_EXCEEDED (a failure or a recovery pause) resumed without a cap that
  lifts it is refused up front with the real cause: re-executing the node would only hit the
  same guard (and spend again doing it);
* a worktree whose ``.git`` pointer names a gitdir that no longer exists (the repository that
  registered it is gone) is refused explicitly: every git command there would fail;
* a run with an interrupted rewind (its intent record exists, iterion/rewind/intent.py) is
  refused: its workspace may be half-restored, and the fix is to finish the rewind;
* a run whose checkpoint is gone (one was written, or the run is paused) is refused rather than
  silently restarted from the entry; an in-place run's workspace must exist and be writable.

All of them only read, and run before the resume claims the run or opens its workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

from gitrefs.persist.errors import ErrorKind
from iterion.budget import Budget, BudgetAsk, BudgetExceeded, raised_axes
from iterion.engine.errors import EngineError, PreflightError
from iterion.engine.preflight import UNCHANGED, check_workspace
from iterion.failure_codes import FailureCode
from iterion.store import Checkpoint, RunDoc, RunStatus, Store, WorkspaceMode
from iterion.store import events as ev

_FLAG = {"max_tokens": "--max-tokens", "max_cost_usd": "--max-cost-usd", "max_duration": "--max-duration",
         "max_duration_s": "--max-duration", "max_iterations": "--max-iterations",
         "max_parallel_branches": "--max-parallel-branches"}


def parked_code(doc: RunDoc, cp: Checkpoint | None) -> str | None:
    """The failure code the resume is recovering from (a recovery pause carries its own)."""
    if cp is not None and cp.recovery_pause and cp.recovery_code:
        return cp.recovery_code
    if doc.status is RunStatus.FAILED_RESUMABLE:
        return doc.failure_code
    return None


def check_budget_raised(doc: RunDoc, cp: Checkpoint | None, ask: BudgetAsk) -> None:
    """Refuse resuming a budget-exceeded run unless ``ask`` (the merged caps) lifts the guard."""
    if parked_code(doc, cp) != FailureCode.BUDGET_EXCEEDED.value:
        return
    usage = cp.accounting if cp is not None else None
    cause = doc.error or "a budget cap was reached"
    try:
        Budget(ask, usage=usage).check()
    except BudgetExceeded as exc:
        flag = _FLAG.get(exc.axis, "--max-...")
        raise EngineError(
            f"run {doc.id} stopped on BUDGET_EXCEEDED ({cause}); resuming with these caps would hit the same "
            f"guard at once: {exc.axis} is {exc.consumed:g} consumed against a cap of {exc.cap:g}",
            hint=f"raise it above the amount already consumed, e.g. `iterion resume --run-id {doc.id} {flag} ...` "
                 "(consumed accounting is kept across a resume)", exit_code=ErrorKind.REFUSED) from None
    if usage is not None and ask.max_iterations and usage.iterations >= ask.max_iterations:
        # the resume executes at least one more node: a cap not above the count cannot pass
        raise EngineError(
            f"run {doc.id} stopped on BUDGET_EXCEEDED ({cause}); {usage.iterations} node executions are already "
            f"consumed against a max_iterations cap of {ask.max_iterations}, so the re-executed node would hit "
            "the same guard",
            hint=f"choose a cap above the amount already consumed: `iterion resume --run-id {doc.id} "
                 f"--max-iterations {usage.iterations + 10}`", exit_code=ErrorKind.REFUSED)
    if not raised_axes(doc.budget, ask):
        raise EngineError(
            f"run {doc.id} stopped on BUDGET_EXCEEDED ({cause}); resuming without a raised cap would hit the "
            "same guard again",
            hint=f"pass a larger cap: `iterion resume --run-id {doc.id} --max-cost-usd/--max-tokens/"
                 "--max-duration/--max-iterations ...`", exit_code=ErrorKind.REFUSED)


def _gitdir_of(worktree: Path) -> Path | None:
    dotgit = worktree / ".git"
    if not dotgit.is_file():
        return None
    try:
        text = dotgit.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:"):].strip())
    return target if target.is_absolute() else (worktree / target)


def check_worktree_link(doc: RunDoc) -> None:
    """Refuse a worktree run whose checkout vanished or whose .git pointer is dangling (one not
    created yet is made by the run, before its first node that needs it)."""
    if doc.workspace_mode is not WorkspaceMode.WORKTREE:
        return
    if doc.worktree is not None and not doc.worktree.created:
        repo = doc.options.get("repo_dir")
        if repo and not Path(repo).is_dir():
            raise EngineError(f"run {doc.id}: the repository its worktree is to be added to ({repo}) no longer "
                              "exists; cannot resume", hint="restore the repository at that path, or start a new run",
                              exit_code=ErrorKind.REFUSED)
        return  # made by the run, before its first node that needs it
    path = Path(doc.worktree.path if doc.worktree is not None else doc.workspace_dir)
    if not path.is_dir():
        raise EngineError(f"run {doc.id}: its worktree {path} no longer exists; cannot resume",
                          hint=f"rewind it (`iterion rewind --run-id {doc.id} --node NODE`) to rebuild the "
                               "worktree, or start a new run", exit_code=ErrorKind.REFUSED)
    gitdir = _gitdir_of(path)
    if gitdir is not None and not gitdir.exists():
        raise EngineError(
            f"run {doc.id}: its worktree {path} has a .git pointer naming gitdir {gitdir}, which no longer exists "
            "(the repository that registered the worktree is gone); refusing to resume: every git command there "
            "would fail",
            hint="restore the repository at its old path (or repair the pointer with `git worktree repair`), "
                 "then resume", exit_code=ErrorKind.REFUSED)


def check_no_interrupted_rewind(store: Store, run_id: str) -> None:
    """Refuse a run whose rewind was killed mid-way: ``iterion rewind`` finishes it first."""
    if os.path.lexists(store.paths(run_id).rewind_intent):
        raise EngineError(f"run {run_id} has an interrupted rewind and its workspace may be half-restored; "
                          f"finish it with `iterion rewind --run-id {run_id}`, then resume", exit_code=ErrorKind.BAD_INPUT)


def check_checkpoint_present(doc: RunDoc, cp: Checkpoint | None, events: list[ev.Event],
                             path: Path | str | None = None) -> None:
    """A checkpoint that existed (or must exist: a paused run) and is gone: nothing to resume from.

    ``path``: where the checkpoint should be, named in the refusal."""
    if cp is not None:
        return
    written = any(e.type == ev.CHECKPOINT_WRITTEN for e in events)
    paused = doc.status in (RunStatus.PAUSED_WAITING_HUMAN, RunStatus.PAUSED_OPERATOR)
    if written or paused:
        where = f" ({path})" if path is not None else ""
        raise PreflightError(f"run {doc.id}: checkpoint missing: nothing to resume from{where}; {UNCHANGED}",
                             # (not rewind: it needs the checkpoint too, and refuses)
                             hint="restore checkpoint.json from a backup, or start a new run")


def check_workspace_usable(doc: RunDoc) -> None:
    """An in-place run executes in its recorded workspace: it must exist and be writable."""
    if doc.workspace_mode is WorkspaceMode.WORKTREE:
        return  # check_worktree_link (a released worktree is rebuilt by a rewind)
    path = Path(doc.workspace_dir) if doc.workspace_dir else None
    check_workspace(path, doc.id, fix="restore the workspace at that path, or start a new run")
