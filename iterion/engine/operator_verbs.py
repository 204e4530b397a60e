"""The operator's verbs: ``cancel_run`` and ``pause_run`` (``iterion cancel``/``pause``, the HTTP
API's, a runner's control subject).

A live process executing the run gets a request (``iterion.engine.control``: the document and
the executing side). When no live process owns the run (no one holds its lock), a cancel just
moves the status; the lock is taken for that write so a resume cannot claim the run in between.
A ``running`` run cancelled that way lost its process mid-run: a ``takeover:`` boundary is
recorded first, like every takeover (iterion.engine.takeover), and its state is banked and pushed
(iterion.engine.checkpoint_push). This module sits above those: none of them imports it, so
its deferred imports of them close no cycle; they are deferred only because they pull in the
whole engine, which `iterion pause` and a cancel of a live run never need (CLI start-up).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from iterion.engine.control import POLL_S, Action, clear_request, write_request
from iterion.engine.preflight import check_event_log, check_run_dir
from iterion.engine.stale import owner_verdict
from iterion.failure_codes import FailureCode
from iterion.store import Command, RunStatus, Store, check_command
from iterion.store import events as ev
from iterion.store.errors import StatusRefusedError


@dataclass
class ControlOutcome:
    run_id: str
    action: str
    status: str             # the run's status when the command returned
    delivered: str          # "direct" (no live process: status moved here) | "requested" | "pending"
    restart_node: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "action": self.action, "status": self.status, "delivered": self.delivered,
                "restart_node": self.restart_node, "message": self.message}


def _restart_node(store: Store, run_id: str) -> str | None:
    try:
        cp = store.load_checkpoint(run_id)
    except Exception:  # noqa: BLE001 - display only
        return None
    return cp.restart_node if cp else None


def _preflight_cancel(store: Store, run_id: str) -> None:
    """What a cancel writes must be usable: the event log (read and appended) and the run directory
    (the run document, the request). Reading only (iterion/engine/preflight.py)."""
    check_event_log(store, run_id)
    check_run_dir(store, run_id)


def _cancel_directly(store: Store, run_id: str, reason: str) -> ControlOutcome | None:
    """Move a run no process executes to ``cancelled`` (None if a live process owns it)."""
    lock = store.lock(run_id)
    if not lock.try_acquire():
        return None
    try:
        doc = store.load_run(run_id)
        if doc.status is RunStatus.CANCELLED:
            return ControlOutcome(run_id, Action.CANCEL.value, doc.status.value, "direct",
                                  _restart_node(store, run_id), "already cancelled")
        check_command(Command.CANCEL, run_id, doc.status)
        _preflight_cancel(store, run_id)  # under the lock, before the first write
        previous = doc.status
        if previous is RunStatus.RUNNING:
            _record_cancel_takeover(store, doc)  # its process died mid-run: before the status moves
        store.update_run(run_id, lambda d: d.set_status(RunStatus.CANCELLED, failure_code=FailureCode.CANCELLED.value,
                                                        error=reason))
        store.events(run_id).append(ev.RUN_CANCELLED, payload={"reason": reason, "from_status": previous.value,
                                                               "restart_node": _restart_node(store, run_id),
                                                               "by": "operator", "live": False})
        clear_request(store, run_id)
        from iterion.engine.checkpoint_push import after_found_dead  # (start-up: see the module doc)

        after_found_dead(store, run_id)  # bank it, record final_branch/_commit, push its state
        return ControlOutcome(run_id, Action.CANCEL.value, RunStatus.CANCELLED.value, "direct",
                              _restart_node(store, run_id), f"run was {previous.value}; no process executes it")
    finally:
        lock.release()


def _record_cancel_takeover(store: Store, doc: Any) -> None:
    """A ``running`` run whose lock is free lost its process: record the takeover boundary (what
    changed since its last boundary is unattributable - see iterion.engine.takeover)."""
    from iterion.engine.takeover import BY_CANCEL, record_takeover  # (start-up: see the module doc)

    try:
        cp = store.load_checkpoint(doc.id)
    except Exception:  # noqa: BLE001 - unreadable: no anchor for the boundary
        cp = None
    proof = f"no process holds its lock ({owner_verdict(doc).reason})"
    record_takeover(store, doc, cp, how=BY_CANCEL, proof=proof)


def _wait_for(store: Store, run_id: str, timeout_s: float) -> RunStatus:
    deadline = time.monotonic() + timeout_s
    while True:
        status = store.load_run(run_id).status
        if status is not RunStatus.RUNNING or time.monotonic() >= deadline or not store.is_locked(run_id):
            return status
        time.sleep(POLL_S)


def cancel_run(store: Store, run_id: str, *, wait_s: float = 30.0, reason: str | None = None) -> ControlOutcome:
    """Cancel ``run_id``: interrupt its live process, or just move the status when there is none."""
    run_id = store.resolve_run(run_id)
    reason = reason or "cancelled by operator (iterion cancel)"
    doc = store.load_run(run_id)
    if doc.status is not RunStatus.CANCELLED:
        check_command(Command.CANCEL, run_id, doc.status)
        _preflight_cancel(store, run_id)  # check first: a refusal writes nothing, not even the lock record
    direct = _cancel_directly(store, run_id, reason)
    if direct is not None:
        return direct
    # a live process executes it: ask it, then wait for it to record the cancel
    write_request(store, run_id, Action.CANCEL, reason)
    if wait_s <= 0:
        return ControlOutcome(run_id, Action.CANCEL.value, RunStatus.RUNNING.value, "pending",
                              message="requested; the run's process will stop at once")
    status = _wait_for(store, run_id, wait_s)
    if status is RunStatus.RUNNING:
        direct = _cancel_directly(store, run_id, reason)  # its process died before picking it up
        if direct is not None:
            return direct
        return ControlOutcome(run_id, Action.CANCEL.value, status.value, "pending",
                              message=f"requested; the run did not stop within {wait_s:g}s")
    if status is not RunStatus.CANCELLED and status in (RunStatus.PAUSED_WAITING_HUMAN, RunStatus.PAUSED_OPERATOR,
                                                         RunStatus.FAILED_RESUMABLE):
        # it parked on its own before seeing the request: the operator still wants it cancelled
        direct = _cancel_directly(store, run_id, reason)
        if direct is not None:
            return direct
    return ControlOutcome(run_id, Action.CANCEL.value, status.value, "requested", _restart_node(store, run_id),
                          "" if status is RunStatus.CANCELLED else f"the run ended {status.value} first")


def pause_run(store: Store, run_id: str, *, wait_s: float = 30.0, reason: str | None = None) -> ControlOutcome:
    """Ask the live process of a running run to park ``paused_operator`` at its next node boundary."""
    run_id = store.resolve_run(run_id)
    reason = reason or "paused by operator (iterion pause)"
    doc = store.load_run(run_id)
    check_command(Command.PAUSE, run_id, doc.status)
    if not store.is_locked(run_id):
        dead = owner_verdict(doc).dead
        take = f"`iterion resume --run-id {run_id}`" + ("" if dead else " --force-stale")
        raise StatusRefusedError(
            f"run {run_id} is running but no process executes it (its owner is gone): there is nothing to pause",
            hint=f"cancel it (`iterion cancel --run-id {run_id}`) or take it over with {take}")
    write_request(store, run_id, Action.PAUSE, reason)
    if wait_s <= 0:
        return ControlOutcome(run_id, Action.PAUSE.value, RunStatus.RUNNING.value, "pending",
                              message="requested; the run pauses at its next node boundary")
    status = _wait_for(store, run_id, wait_s)
    if status is RunStatus.RUNNING:
        return ControlOutcome(run_id, Action.PAUSE.value, status.value, "pending",
                              message=f"requested; the current node has not finished within {wait_s:g}s "
                                      "(the run pauses at its next node boundary)")
    clear_request(store, run_id)
    note = "" if status is RunStatus.PAUSED_OPERATOR else f"the run ended {status.value} before its next node boundary"
    return ControlOutcome(run_id, Action.PAUSE.value, status.value, "requested", _restart_node(store, run_id), note)
