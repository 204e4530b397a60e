"""How a run stops: every way out of the main loop is one ``Stop`` executed by ``stop_run``.

The write order of a stop is the contract of docs/technical/durability.md, section 3 "Each kind
of stop" (and section 4 for what a SIGKILL in each gap leaves); ``stop_run`` is the one place it
is encoded:

1. the boundary (``fail:`` best effort and once per execution, or ``pause:``);
2. the interaction record, when the stop waits for a person (``pending`` set in memory);
3. the checkpoint (the commit point of the stop). When it cannot be written and the stop
   requires it (``lost`` given), the run stops instead through ``lost``: parked
   ``failed_resumable`` on the checkpoint already on disk when a full or read-only disk is why,
   else ``failed`` with ``CHECKPOINT_LOST``. Without ``lost`` a failed write is reported by its
   ``checkpoint_lost`` event only and the stop goes on;
4. work that must follow the checkpoint and precede the status (``finalize``: the worktree's
   final commit, removing an operator's ``control.json``);
5. the status (``write_status``: on a full disk the space reserve is released and the write
   tried once more). Checkpoint before status: a status never claims more than the checkpoint
   holds;
6. the closing events;
7. the ``RunResult`` read back from the store.

The runner (``iterion.engine.runner.Runner``) and the two helpers that park a run from outside
it (``control.park_operator``, ``recovery.park_recovery``) describe their stop as data and call
``stop_run``; they reach the runner only through the small ``StopHost`` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from gitrefs.boundary import BoundaryKind
from iterion.engine.errors import NodeFailure
from iterion.engine.result import RunResult
from iterion.engine.state import Pending
from iterion.engine.storage import CODE as STORAGE_CODE
from iterion.engine.storage import describe, write_status
from iterion.failure_codes import FailureCode
from iterion.store import AnchorReason, RunStatus
from iterion.store import events as ev
from iterion.store.checkpoint import InteractionKind

if TYPE_CHECKING:
    from iterion.engine.context import ExecContext

# fields of the worktree finalisation (``Stop.finalize``) the RunResult carries
_FINALIZED_FIELDS = ("final_branch", "merged_into")


class StopHost(Protocol):
    """What a stop needs of the runner executing the run."""

    ctx: ExecContext
    storage_error: OSError | None  # a full/read-only disk met by a checkpoint write

    def boundary(self, kind: BoundaryKind, node: str, it: int) -> None:
        """Write a workspace boundary; a failure raises ``NodeFailure``."""

    def fail_boundary(self, node: str, it: int) -> None:
        """The ``fail:`` boundary, best effort, at most once per (node, iteration) and execution."""

    def checkpoint(self, anchor: AnchorReason, restart: str | None, *, strict: bool = True,
                   recovery_code: str | None = None, iteration: int | None = None) -> bool:
        """Write the checkpoint anchored on ``restart`` (False, or ``CheckpointLost`` when
        ``strict``, if it could not be written)."""


@dataclass(frozen=True)
class Mark:
    """Step 1: the boundary a stop writes. ``fail:`` is always best effort (it never masks the
    failure being reported); another kind is best effort when ``best_effort`` (a failure is a
    ``warning`` event), else its ``NodeFailure`` propagates."""

    kind: BoundaryKind
    node: str
    iteration: int
    best_effort: bool = False


@dataclass(frozen=True)
class Ask:
    """Step 2: the interaction record of a stop that waits for a person."""

    node: str
    iteration: int
    kind: InteractionKind
    questions: dict[str, Any]
    reuse: str | None = None  # a re-asked gate adds a turn to its earlier record


@dataclass(frozen=True)
class Lost:
    """What the run was doing, for the stop a lost checkpoint turns into."""

    code: str | None
    what: str


@dataclass(frozen=True)
class Emit:
    type: str
    node: str | None
    iteration: int | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class Closing:
    """What the steps before the events produced, for the events to name."""

    interaction_id: str | None = None
    finalized: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stop:
    """One way a run stops, as data; ``stop_run`` writes it in the one order."""

    status: RunStatus
    code: str | None = None
    error: str | None = None
    mark: Mark | None = None
    ask: Ask | None = None
    anchor: AnchorReason | None = None   # None: no checkpoint (the one on disk stands)
    restart: str | None = None
    iteration: int | None = None         # the anchor's iteration (None: the runner's own rule)
    recovery_code: str | None = None
    lost: Lost | None = None             # the checkpoint must land, else the run stops as lost
    finalize: Callable[[], dict[str, Any]] | None = None
    events: Callable[[Closing], Sequence[Emit]] = lambda _: ()
    notice: str | None = None            # a line for the person watching (iterion/engine/notice.py)


def stop_run(host: StopHost, stop: Stop) -> RunResult:
    """Write ``stop`` in the order of docs/technical/durability.md section 3 (module docstring)."""
    ctx, st = host.ctx, host.ctx.state
    if stop.mark is not None:  # 1
        _mark(host, stop.mark)
    interaction_id = None
    if stop.ask is not None:  # 2
        a = stop.ask
        doc = ctx.store.interactions(ctx.run_id).ask(a.node, a.questions, iteration=a.iteration, kind=a.kind,
                                                     interaction_id=a.reuse)
        st.pending = Pending(doc.id, a.node, a.iteration, a.kind, a.questions)
        interaction_id = doc.id
    if stop.anchor is not None:  # 3
        written = host.checkpoint(stop.anchor, stop.restart, strict=False, recovery_code=stop.recovery_code,
                                  iteration=stop.iteration)
        if not written and stop.lost is not None:
            return lost(host, stop.lost.code, stop.lost.what)
    finalized = stop.finalize() if stop.finalize is not None else {}  # 4
    write_status(ctx.store, ctx.run_id,  # 5
                 lambda doc: doc.set_status(stop.status, failure_code=stop.code, error=stop.error))
    for e in stop.events(Closing(interaction_id, finalized)):  # 6
        ctx.emit(e.type, e.node, e.iteration, e.payload)
    if stop.notice is not None:
        ctx.notify(stop.notice)
    return run_result(ctx, **{k: finalized.get(k) for k in _FINALIZED_FIELDS})  # 7


def _mark(host: StopHost, mark: Mark) -> None:
    if mark.kind is BoundaryKind.FAIL:
        host.fail_boundary(mark.node, mark.iteration)
        return
    try:
        host.boundary(mark.kind, mark.node, mark.iteration)
    except NodeFailure as exc:
        if not mark.best_effort:
            raise
        host.ctx.emit(ev.WARNING, mark.node, mark.iteration, {"message": exc.message})


def lost(host: StopHost, code: str | None, what: str) -> RunResult:
    """The checkpoint could not be written: nothing resumable exists, so the run is failed
    (unless a full disk is why: the previous checkpoint is intact, see ``park_on_storage``)."""
    parked = park_on_storage(host, code, what)
    if parked is not None:
        return parked
    error = f"checkpoint could not be written; {what}" + (f" ({code})" if code else "")
    lost_code = FailureCode.CHECKPOINT_LOST.value
    return stop_run(host, Stop(RunStatus.FAILED, lost_code, error, notice=error, events=lambda _: [
        Emit(ev.RUN_FAILED, None, None, {"code": lost_code, "error": error})]))


def park_on_storage(host: StopHost, code: str | None, what: str) -> RunResult | None:
    """Park ``failed_resumable`` at the checkpoint already on disk, when a storage error is why the
    run could not write its checkpoint or status (None: not a storage failure, or nothing to
    resume). See iterion/engine/storage.py: the reserve is released first, to make room."""
    ctx = host.ctx
    err = host.storage_error
    if err is None and code != STORAGE_CODE.value:
        return None
    if not ctx.store.has_checkpoint(ctx.run_id):
        return None
    ctx.store.release_reserve(ctx.run_id)  # room for the status below and a few events
    try:
        cp = ctx.store.load_checkpoint(ctx.run_id)
    except Exception:  # noqa: BLE001 - only used for the message
        cp = None
    restart = cp.restart_node if cp is not None else None
    cause = describe(err) if err is not None else what
    error = (f"disk full or read-only: {cause}; the run stopped at its last checkpoint"
             + (f" (restart at {restart})" if restart else "")
             + "; free space (or make the disk writable) and resume it")
    storage = STORAGE_CODE.value
    return stop_run(host, Stop(RunStatus.FAILED_RESUMABLE, storage, error, events=lambda _: [
        Emit(ev.RUN_FAILED, restart, None, {"code": storage, "error": error, "resumable": True,
                                            "restart_node": restart})]))


def run_result(ctx: ExecContext, **extra: Any) -> RunResult:
    """The RunResult of a stopped run, read back from the store (status, checkpoint node)."""
    doc = ctx.store.load_run(ctx.run_id)
    try:
        cp = ctx.store.load_checkpoint(ctx.run_id)
    except Exception:  # noqa: BLE001 - a lost checkpoint is reported through the status
        cp = None
    state = ctx.state
    pending = None
    if state.pending is not None and doc.status is RunStatus.PAUSED_WAITING_HUMAN:
        p = state.pending
        pending = {"interaction_id": p.interaction_id, "node": p.node, "kind": p.kind, **p.questions}
    return RunResult(run_id=doc.id, name=doc.name, status=doc.status, failure_code=doc.failure_code,
                     error=doc.error, checkpoint_node=cp.restart_node if cp else None, pending=pending,
                     outputs=dict(state.outputs), workspace=doc.workspace_dir, **extra)
