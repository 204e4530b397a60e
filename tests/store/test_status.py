"""The status table: exactly the spec's statuses, what each command accepts, and refusal messages."""

from __future__ import annotations

import pytest

from iterion.store import Command, RunStatus, StatusRefusedError, accepts, check_command, refusal_message
from iterion.store.status import TRANSITIONS, can_transition


def test_statuses_are_exactly_the_spec_table() -> None:
    assert {s.value for s in RunStatus} == {
        "paused_waiting_human", "failed_resumable", "cancelled", "paused_operator", "running", "queued",
        "finished", "failed"}
    assert set(TRANSITIONS) == set(RunStatus)


@pytest.mark.parametrize("status", ["paused_waiting_human", "failed_resumable", "cancelled", "paused_operator"])
def test_resume_accepts_parked_statuses(status: str) -> None:
    assert accepts(Command.RESUME, status)
    check_command("resume", "R", status)


def test_resume_accepts_running_only_with_force_stale() -> None:
    assert not accepts(Command.RESUME, RunStatus.RUNNING)
    assert accepts(Command.RESUME, RunStatus.RUNNING, force_stale=True)
    with pytest.raises(StatusRefusedError, match="--force-stale"):
        check_command(Command.RESUME, "R", RunStatus.RUNNING)


@pytest.mark.parametrize("status", ["finished", "failed", "queued"])
def test_resume_refuses_terminal_and_queued(status: str) -> None:
    assert not accepts(Command.RESUME, status, force_stale=True)


def test_resume_refusal_message_names_status_and_alternative() -> None:
    assert refusal_message(Command.RESUME, "R", "finished") == (
        "run R is finished: a finished run cannot be resumed; start a new run with `iterion run`")
    msg = refusal_message(Command.RESUME, "R", "failed")
    assert msg.startswith("run R is failed:") and "iterion rewind --run-id R" in msg


def test_rewind_accepts_exactly_the_spec_list() -> None:
    allowed = {s.value for s in RunStatus if accepts(Command.REWIND, s)}
    assert allowed == {"failed", "failed_resumable", "cancelled", "paused_operator", "paused_waiting_human", "queued"}
    msg = refusal_message(Command.REWIND, "R", "running")
    assert msg.startswith("run R is running:") and "cancel or pause it first" in msg
    with pytest.raises(StatusRefusedError, match="run R is finished: a finished run cannot be rewound"):
        check_command(Command.REWIND, "R", RunStatus.FINISHED)


def test_cancel_and_pause() -> None:
    assert accepts(Command.CANCEL, "running") and accepts(Command.CANCEL, "paused_waiting_human")
    assert not accepts(Command.CANCEL, "finished")
    assert "already cancelled" in refusal_message(Command.CANCEL, "R", "cancelled")
    assert accepts(Command.PAUSE, "running") and not accepts(Command.PAUSE, "cancelled")
    assert "resume it with `iterion resume --run-id R`" in refusal_message(Command.PAUSE, "R", "cancelled")


def test_every_refusal_names_the_status() -> None:
    for cmd in Command:
        for status in RunStatus:
            if not accepts(cmd, status, force_stale=True):
                assert refusal_message(cmd, "R", status).startswith(f"run R is {status.value}:")


def test_transitions() -> None:
    assert can_transition("running", "paused_waiting_human")
    assert can_transition("failed", "paused_operator")  # a rewind of a failed run that kept its checkpoint
    assert not can_transition("finished", "running")
    assert not can_transition("cancelled", "finished")
    for status in RunStatus:
        # every status a resume accepts can move to running
        if accepts(Command.RESUME, status, force_stale=True):
            assert can_transition(status, "running")
        # every status a rewind accepts can be parked paused_operator
        if accepts(Command.REWIND, status):
            assert can_transition(status, "paused_operator")
