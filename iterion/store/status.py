"""Run statuses, the one table of allowed transitions, and which commands accept which status.

The statuses are docs/user-guide.md "Statuses". Every surface that asks "may I
resume / rewind / cancel / pause this run?" reads ``ACCEPTS`` through ``check_command`` so the
refusal message is the same everywhere and names what would work instead.
"""

from __future__ import annotations

from enum import StrEnum

from iterion.store.errors import InvalidTransitionError, StatusRefusedError


class RunStatus(StrEnum):
    PAUSED_WAITING_HUMAN = "paused_waiting_human"
    FAILED_RESUMABLE = "failed_resumable"
    CANCELLED = "cancelled"
    PAUSED_OPERATOR = "paused_operator"
    RUNNING = "running"
    QUEUED = "queued"
    FINISHED = "finished"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        """No resume can continue it (a failed run may still be rewound if it kept a checkpoint)."""
        return self in (RunStatus.FINISHED, RunStatus.FAILED)

    @property
    def is_parked(self) -> bool:
        """Stopped with a checkpoint a resume continues from."""
        return self in _RESUMABLE


_RESUMABLE = frozenset({
    RunStatus.PAUSED_WAITING_HUMAN, RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED, RunStatus.PAUSED_OPERATOR,
})

S = RunStatus

# from -> the statuses a writer may move the run to. Self-loops are the legitimate re-writes:
# running -> running is a stale-run takeover, a parked run re-parks (re-rewind, review gate).
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED, S.FAILED, S.FAILED_RESUMABLE, S.PAUSED_OPERATOR}),
    S.RUNNING: frozenset({S.RUNNING, S.PAUSED_WAITING_HUMAN, S.PAUSED_OPERATOR, S.FAILED_RESUMABLE,
                          S.CANCELLED, S.FINISHED, S.FAILED}),
    S.PAUSED_WAITING_HUMAN: frozenset({S.RUNNING, S.PAUSED_WAITING_HUMAN, S.PAUSED_OPERATOR, S.CANCELLED,
                                       S.FAILED}),
    S.FAILED_RESUMABLE: frozenset({S.RUNNING, S.PAUSED_OPERATOR, S.FAILED_RESUMABLE, S.CANCELLED, S.FAILED}),
    S.CANCELLED: frozenset({S.RUNNING, S.PAUSED_OPERATOR, S.CANCELLED}),
    S.PAUSED_OPERATOR: frozenset({S.RUNNING, S.PAUSED_OPERATOR, S.CANCELLED}),
    # a failed run that kept its checkpoint can be rewound (parks paused_operator)
    S.FAILED: frozenset({S.PAUSED_OPERATOR}),
    S.FINISHED: frozenset(),
}


def can_transition(old: RunStatus | str, new: RunStatus | str) -> bool:
    return RunStatus(new) in TRANSITIONS[RunStatus(old)]


def check_transition(run_id: str, old: RunStatus | str, new: RunStatus | str) -> None:
    old, new = RunStatus(old), RunStatus(new)
    if new not in TRANSITIONS[old]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[old])) or "none: it is final"
        raise InvalidTransitionError(f"run {run_id} cannot move from {old.value} to {new.value} (allowed: {allowed})")


class Command(StrEnum):
    RESUME = "resume"
    REWIND = "rewind"
    CANCEL = "cancel"
    PAUSE = "pause"


ACCEPTS: dict[Command, frozenset[RunStatus]] = {
    Command.RESUME: _RESUMABLE,  # + running with --force-stale (see accepts)
    Command.REWIND: frozenset({S.FAILED, S.FAILED_RESUMABLE, S.CANCELLED, S.PAUSED_OPERATOR,
                               S.PAUSED_WAITING_HUMAN, S.QUEUED}),
    Command.CANCEL: frozenset({S.RUNNING, S.QUEUED, S.PAUSED_WAITING_HUMAN, S.PAUSED_OPERATOR,
                               S.FAILED_RESUMABLE}),
    Command.PAUSE: frozenset({S.RUNNING}),
}


def accepts(command: Command | str, status: RunStatus | str, *, force_stale: bool = False) -> bool:
    command, status = Command(command), RunStatus(status)
    if command is Command.RESUME and status is S.RUNNING:
        return force_stale
    return status in ACCEPTS[command]


def refusal(command: Command | str, run_id: str, status: RunStatus | str) -> tuple[str, str | None]:
    """(message, hint) explaining why ``command`` refuses a run in ``status`` and what would work."""
    command, status = Command(command), RunStatus(status)
    head = f"run {run_id} is {status.value}"
    new_run = "start a new run with `iterion run`"
    rewind = f"`iterion rewind --run-id {run_id} --node NODE`"
    if command is Command.RESUME:
        msg = {
            S.FINISHED: f"{head}: a finished run cannot be resumed; {new_run}",
            S.FAILED: (f"{head}: a failed run cannot be resumed (the workflow ended it on purpose or it kept no "
                       f"resumable state); rewind it with {rewind} to replay from a node, or {new_run}"),
            S.RUNNING: (f"{head}: it should still have an owner; inspect it with `iterion inspect --run-id {run_id}` "
                        f"and, if its owner is gone, take it over with `iterion resume --run-id {run_id} --force-stale`"),
            S.QUEUED: (f"{head}: a queued run is continued by its runner when its slot opens, not by hand; "
                       f"cancel it with `iterion cancel --run-id {run_id}` to stop it"),
        }.get(status)
        return (msg or f"{head}: it cannot be resumed", None)
    if command is Command.REWIND:
        msg = {
            S.RUNNING: (f"{head}: its engine owns the checkpoint and would overwrite a rewind at its next node "
                        f"boundary; cancel or pause it first (`iterion cancel --run-id {run_id}`)"),
            S.FINISHED: f"{head}: a finished run cannot be rewound; {new_run}",
        }.get(status)
        return (msg or f"{head}: it cannot be rewound", None)
    if command is Command.CANCEL:
        msg = {
            S.CANCELLED: f"{head}: it is already cancelled; resume it with `iterion resume --run-id {run_id}`",
            S.FINISHED: f"{head}: a finished run has nothing left to cancel",
            S.FAILED: f"{head}: a failed run has nothing left to cancel",
        }.get(status)
        return (msg or f"{head}: it cannot be cancelled", None)
    msg = f"{head}: only a running run can be paused"
    if status.is_parked:
        msg += f"; it is already stopped, resume it with `iterion resume --run-id {run_id}`"
    return (msg, None)


def refusal_message(command: Command | str, run_id: str, status: RunStatus | str) -> str:
    return refusal(command, run_id, status)[0]


def check_command(command: Command | str, run_id: str, status: RunStatus | str, *, force_stale: bool = False) -> None:
    """Raise StatusRefusedError (one line naming the status and what would work) unless accepted."""
    if not accepts(command, status, force_stale=force_stale):
        message, hint = refusal(command, run_id, status)
        raise StatusRefusedError(message, hint=hint)
