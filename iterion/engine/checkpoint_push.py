"""Workspace checkpoints pushed to a remote, and the bank a run leaves when it ends.

The setting (``--push-checkpoints REMOTE`` / ``--push-every N``): the flag beats the environment
(``ITERION_PUSH_CHECKPOINTS`` / ``ITERION_PUSH_EVERY``), which beats the workflow's
``push_checkpoints:`` / ``push_every:``. It is resolved once at launch and persisted on the run
document (``options.push_checkpoints``), so every resume keeps pushing the same way; ``resume
--push-checkpoints REMOTE`` / ``--no-push-checkpoints`` / ``--push-every N`` replace it (and the
replacement is persisted in turn).

What is pushed, under ``refs/iterion/runs/<run>/checkpoints/<n>`` (``gitrefs.layout``):

* a worktree run: its boundary commit (the chain head) at a pause; the bank commit on its branch
  when it fails, is cancelled or ends ``failed``; the final commit when it finishes;
* an in-place run: the tracker's head snapshot exported as a commit into the repository's object
  database (``workspacetrack.gitexport``: index, HEAD and branches untouched).

When: once the run has parked (paused, failed, cancelled, finished: AFTER its status and its
checkpoint are written), every ``--push-every`` completed nodes, and when a dead run is found
(the orphan sweep, a cancel of a run no process executes).

Invariants:

* a push never fails or blocks the run: a failure becomes ``run_workspace_checkpoint_failed``
  ``{ref, remote, error, time}`` on the timeline and the run goes on / stays parked;
* each success appends ``run_workspace_checkpoint`` ``{ref, commit, remote, time}`` AFTER git
  reported the push done; a failure appends only the failed event, so the last success stays the
  recovery hint (``iterion.workspace_checkpoint``);
* the run's status is written before a stop push starts: a process killed mid-push leaves a
  parked (or, for a periodic push, orphaned and then promoted) run that resumes normally, and at
  worst an unrecorded ref on the remote, which the next push under the same number overwrites
  (``n`` = 1 + the highest number on the timeline; pushes are forced).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gitrefs import layout
from gitrefs.boundary import BoundaryKind, BoundaryLabel
from iterion.engine.errors import EngineError
from iterion.engine.versioning import Versioning, open_run_versioning
from iterion.store import RunDoc, RunStatus, Store, WorkspaceMode
from iterion.store import events as ev

ENV_REMOTE = "ITERION_PUSH_CHECKPOINTS"
ENV_EVERY = "ITERION_PUSH_EVERY"
OPTION_KEY = "push_checkpoints"  # the run document's options key (the persisted launch ask)

# the run states at which the run's state is pushed when it stops, and the reason recorded
STOP_REASONS = {
    RunStatus.PAUSED_WAITING_HUMAN: "pause",
    RunStatus.PAUSED_OPERATOR: "pause",
    RunStatus.FAILED_RESUMABLE: "failure",
    RunStatus.FAILED: "failure",
    RunStatus.CANCELLED: "cancel",
    RunStatus.FINISHED: "end",
}
BANKED = (RunStatus.FAILED_RESUMABLE, RunStatus.FAILED, RunStatus.CANCELLED)


@dataclass(frozen=True)
class PushSetting:
    remote: str
    every: int = 0       # 0: only at stops
    source: str = "flag"  # where the remote came from: flag | env | workflow | resume

    def to_json(self) -> dict[str, Any]:
        return {"remote": self.remote, "every": self.every, "source": self.source}

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> PushSetting | None:
        raw = options.get(OPTION_KEY)
        if not isinstance(raw, dict) or not isinstance(raw.get("remote"), str) or not raw["remote"]:
            return None
        every = raw.get("every")
        return cls(raw["remote"], every if isinstance(every, int) and every > 0 else 0,
                   str(raw.get("source") or "flag"))


def _env_every() -> int | None:
    raw = os.environ.get(ENV_EVERY, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise EngineError(f"{ENV_EVERY}={raw!r} is not a whole number of nodes", hint=f"e.g. {ENV_EVERY}=5")
    return int(raw)


def resolve_setting(flag_remote: str | None, flag_every: int | None, wf_remote: str | None,
                    wf_every: int = 0) -> PushSetting | None:
    """flag > ITERION_PUSH_CHECKPOINTS > the workflow's setting; the same order for ``every``.

    An empty flag or environment value turns pushing off (it does not fall through)."""
    env_remote = os.environ.get(ENV_REMOTE)
    if flag_remote is not None:
        remote, source = flag_remote.strip(), "flag"
    elif env_remote is not None:
        remote, source = env_remote.strip(), "env"
    else:
        remote, source = (wf_remote or "").strip(), "workflow"
    env_every = _env_every()
    every = flag_every if flag_every is not None else env_every if env_every is not None else wf_every
    if every is not None and every < 0:
        raise EngineError(f"--push-every must be at least 1, got {every}")
    if not remote:
        if flag_every:
            raise EngineError("--push-every needs a remote to push to",
                              hint="add --push-checkpoints REMOTE (e.g. origin)")
        return None
    from gitrefs.checkpoint_push import push_timeout_s

    push_timeout_s()  # a garbage $ITERION_PUSH_TIMEOUT_S refuses the launch, not each push later
    return PushSetting(remote, every or 0, source)


def check_target(workspace: Path, setting: PushSetting) -> None:
    """Refuse up front (before the run exists) a push that can never work: no git repository,
    or a remote that is neither configured, nor a URL, nor an existing path."""
    from gitrefs import GitRefsError
    from gitrefs.remotes import check_remote
    from gitrefs.workspace import open_workspace

    try:
        ws = open_workspace(workspace)
        check_remote(ws, setting.remote)
    except GitRefsError as exc:
        where = {"env": f"{ENV_REMOTE}={setting.remote}", "workflow": f"the workflow's push_checkpoints: "
                 f"{setting.remote}"}.get(setting.source, f"--push-checkpoints {setting.remote}")
        raise EngineError(f"{where}: {exc.message}",
                          hint=exc.hint or "push to a remote of the workspace's repository") from None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class CheckpointPusher:
    """Pushes one run's workspace state; every method is best effort (never raises)."""

    def __init__(self, store: Store, run_id: str, setting: PushSetting, versioning: Versioning, *,
                 emit: Any = None, repo_dir: str | None = None) -> None:
        self.store, self.run_id, self.setting, self.versioning = store, run_id, setting, versioning
        self.repo_dir = repo_dir  # a worktree run: the operator's checkout it was added to
        self._emit = emit
        self._lock = threading.Lock()
        self._nodes = 0
        self._next: int | None = None
        self._last_ok: tuple[str, str] | None = None  # (commit, remote) of the last recorded success
        self._last_tree: str | None = None  # the tree of that commit, when recorded

    # -- the timeline ------------------------------------------------------------------------
    def _append(self, type: str, payload: dict[str, Any]) -> None:
        if self._emit is not None:
            self._emit(type, None, None, payload)
            return
        try:
            self.store.events(self.run_id).append(type, payload=payload)
        except OSError:
            pass  # the timeline is for people; nothing else depends on this line

    def _sequence(self) -> int:
        if self._next is None:
            highest = 0
            try:
                events = self.store.read_events(self.run_id)
            except OSError:
                events = []
            for e in events:
                if e.type in (ev.RUN_WORKSPACE_CHECKPOINT, ev.RUN_WORKSPACE_CHECKPOINT_FAILED):
                    try:
                        parsed = layout.parse_ref(str(e.payload.get("ref") or ""))
                    except ValueError:
                        continue
                    if parsed.run_id == self.run_id and parsed.number is not None:
                        highest = max(highest, parsed.number)
                    if e.type == ev.RUN_WORKSPACE_CHECKPOINT:
                        self._last_ok = (str(e.payload.get("commit") or ""), str(e.payload.get("remote") or ""))
                        self._last_tree = str(e.payload.get("tree") or "") or None
            self._next = highest + 1
        return self._next

    # -- what to push ------------------------------------------------------------------------
    def _state_commit(self) -> tuple[str, dict[str, Any]]:
        """The commit holding the workspace's latest recorded state (and payload extras)."""
        state = self.versioning.push_state()
        return state.commit, dict(state.extra)

    def _push_dir(self) -> Path:
        """Where ``git push`` runs: the top of the operator's checkout, so a remote given as a
        relative path (or configured with one) means what it means to them (``check_target``
        resolved it from there). A worktree shares the objects of that checkout."""
        if self.repo_dir:
            return Path(self.repo_dir)
        return self.versioning.push_dir()

    def push(self, reason: str, *, commit: str | None = None, label: str | None = None) -> bool:
        """Push ``commit`` (default: the latest recorded state); True when a success was recorded."""
        with self._lock:
            try:
                return self._push(reason, commit, label)
            except Exception as exc:  # noqa: BLE001 - a push never fails the run
                self._append(ev.RUN_WORKSPACE_CHECKPOINT_FAILED, {
                    "ref": None, "remote": self.setting.remote, "error": f"{type(exc).__name__}: {exc}"[:500],
                    "time": _now(), "reason": reason})
                return False

    def _push(self, reason: str, commit: str | None, label: str | None) -> bool:
        from gitrefs.checkpoint_push import push_commit

        n = self._sequence()
        extra: dict[str, Any] = {}
        if commit is None:
            commit, extra = self._state_commit()
        if self._last_ok == (commit, self.setting.remote) or (
                self._last_ok is not None and self._last_ok[1] == self.setting.remote
                and extra.get("tree") is not None and extra["tree"] == self._last_tree):
            # the remote already holds this very state under the last recorded ref (an in-place
            # export of an unchanged tree differs only in its commit time: not worth a ref)
            return True
        ref = layout.checkpoint_ref(self.run_id, n)
        self._next = n + 1  # a number is used once per process, whatever the outcome
        outcome = push_commit(self._push_dir(), self.setting.remote, commit, ref)
        common = {"ref": ref, "remote": self.setting.remote, "time": _now(), "reason": reason,
                  **({"label": label} if label else {})}
        if not outcome.ok:
            self._append(ev.RUN_WORKSPACE_CHECKPOINT_FAILED, {**common, "error": outcome.error})
            return False
        self._last_ok = (commit, self.setting.remote)
        self._last_tree = extra.get("tree")
        self._append(ev.RUN_WORKSPACE_CHECKPOINT, {**common, "commit": commit,
                                                   "mechanism": self.versioning.mechanism, **extra})
        return True

    @property
    def last_commit(self) -> str | None:
        return self._last_ok[0] if self._last_ok else None

    def after_boundary(self, label: BoundaryLabel) -> None:
        """Every ``every`` completed nodes (``nodes:`` boundaries), push."""
        if self.setting.every <= 0 or label.kind is not BoundaryKind.NODES:
            return
        with self._lock:
            self._nodes += 1
            due = self._nodes % self.setting.every == 0
        if due:
            self.push("every_nodes", label=str(label))


# -- banking a stopped run -----------------------------------------------------------------------
def bank_worktree(doc: RunDoc, why: str) -> dict[str, str] | None:
    """Commit a worktree run's tree on its own branch (its worktree's index, never the user's):
    {final_branch, final_commit}; None for an in-place run or a worktree released or not created
    (nothing to bank: its tree is the base commit's)."""
    from iterion.engine.worktree import commit_worktree

    if doc.workspace_mode is not WorkspaceMode.WORKTREE or doc.worktree is None or doc.worktree.absent:
        return None
    path = Path(doc.worktree.path)
    if not path.is_dir():
        return None
    commit = commit_worktree(path, f"iterion: run {doc.name} {why} (banked)")
    return {"final_branch": doc.worktree.branch, "final_commit": commit}


def record_final(store: Store, run_id: str, final: dict[str, Any]) -> None:
    branch, commit = final.get("final_branch"), final.get("final_commit")
    if not commit:
        return

    def mutate(d: RunDoc) -> None:
        d.final_branch = branch if isinstance(branch, str) else d.final_branch
        d.final_commit = str(commit)

    store.update_run(run_id, mutate)


def after_stop(store: Store, doc: RunDoc, status: RunStatus, versioning: Versioning | None, *, emit: Any = None,
               pusher: CheckpointPusher | None = None, final: dict[str, Any] | None = None) -> None:
    """Once a run has parked with ``status``: bank it (fail/cancel), record final_branch/_commit,
    and push its state when the run pushes checkpoints. Best effort: never raises."""
    reason = STOP_REASONS.get(status)
    if reason is None:
        return
    final = dict(final or {})
    if status in BANKED and not final:
        try:
            # the document as stored: the run may have made its worktree since ``doc`` was read
            final = bank_worktree(store.load_run(doc.id), status.value) or {}
        except Exception as exc:  # noqa: BLE001 - the run's own outcome stands
            _warn(store, doc.id, emit, f"the run's state could not be banked on its branch: {exc}")
    if pusher is not None:
        commit = final.get("final_commit")
        ok = pusher.push(reason, commit=commit)
        if not final and status in BANKED and ok and pusher.versioning.push_is_bank:
            final = {"final_commit": pusher.last_commit}  # an in-place run's bank: the pushed export
    try:
        record_final(store, doc.id, final)
    except Exception as exc:  # noqa: BLE001 - same
        _warn(store, doc.id, emit, f"final_branch/final_commit could not be recorded: {exc}")


def _warn(store: Store, run_id: str, emit: Any, message: str) -> None:
    if emit is not None:
        emit(ev.WARNING, None, None, {"message": message})
        return
    try:
        store.events(run_id).append(ev.WARNING, payload={"message": message})
    except OSError:
        pass


def pusher_for(store: Store, doc: RunDoc, versioning: Versioning, *, emit: Any = None) -> CheckpointPusher | None:
    setting = PushSetting.from_options(doc.options)
    if setting is None:
        return None
    repo_dir = doc.options.get("repo_dir") if doc.workspace_mode is WorkspaceMode.WORKTREE else None
    return CheckpointPusher(store, doc.id, setting, versioning, emit=emit,
                            repo_dir=repo_dir if isinstance(repo_dir, str) and Path(repo_dir).is_dir() else None)


def after_found_dead(store: Store, run_id: str) -> None:
    """A run whose process died was moved to a parked status by someone else (the orphan sweep,
    a cancel): bank it and push its state as that process would have. Best effort."""
    try:
        doc = store.load_run(run_id)
    except Exception:  # noqa: BLE001 - nothing to bank from
        return
    versioning = None
    pusher = None
    if PushSetting.from_options(doc.options) is not None and doc.workspace_dir and not (
            doc.worktree is not None and doc.worktree.released):
        try:
            versioning = open_run_versioning(store, doc, start=False, watch=False)
            pusher = pusher_for(store, doc, versioning)
        except Exception as exc:  # noqa: BLE001 - reported, never blocks the sweep
            _warn(store, run_id, None, f"the workspace checkpoint could not be pushed: {exc}")
    try:
        after_stop(store, doc, doc.status, versioning, pusher=pusher)
    finally:
        if versioning is not None:
            versioning.close()
