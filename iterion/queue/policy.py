"""What a runner does with a delivery: before executing (claim) and after (disposition).

The one home of the queue's redelivery rules (the dispositions table of README "Runs across
machines: the queue and `iterion runner`"). Every classification
of a failure code comes from ``iterion.failure_codes`` through ``engine.auto_resume.verdict_for``
(the same verdict ``--auto-resume`` reaches), and each transient code's re-offer delay is that
table's ``redelivery_delay_s`` column.

Dispositions:
- ACK: finished; paused (a person, an operator); cancelled by an operator; a deliberate failure
  (a fail node's refusal, matched by the RunResult's ``deliberate`` sentinel, never by code); a
  failure the table does not let an unattended surface retry (``run_retry_skipped``); a delivery
  dropped on purpose (a finished run, explicit-resume-required, a bot-defined code redelivered).
- NAK with a delay: a transient failure (the table's delay, ``run_retry_scheduled``); a lease held
  by another runner; a store that did not answer; the runner shutting down.
- TERM: an undecodable message; an unknown run.
- PARK: a transient failure at the last permitted delivery: the delivery goes to the dead-letter
  stream and the run's failure code becomes DLQ_PARKED (a bot-defined code is never overwritten:
  such a run is acked long before, so it never reaches this).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gitrefs.persist.envsettings import env_number
from iterion.failure_codes import row_for
from iterion.queue.delivery import Delivery, Kind
from iterion.store import RunStatus

if TYPE_CHECKING:
    from iterion.engine.result import RunResult
    from iterion.store import RunDoc, Store

DELAY_SCALE_ENV = "ITERION_QUEUE_DELAY_SCALE"  # multiplies every re-offer delay (tests: 0.01)
RETRY_DELAY_S = 5.0          # a lease held elsewhere, a store timeout: offered again soon
SHUTDOWN_DELAY_S = 1.0       # another runner may take it at once
TRANSIENT_DEFAULT_DELAY_S = 30.0
# the marker a runner leaves on a run it interrupted (shutdown): its redelivery resumes it
INTERRUPTED_OPTION = "queue_interrupted"


class Verb(StrEnum):
    ACK = "ack"
    NAK = "nak"
    TERM = "term"
    PARK = "park"


@dataclass(frozen=True)
class Disposition:
    verb: Verb
    reason: str                      # one word, the log's and the event's: finished, transient, ...
    delay_s: float = 0.0             # NAK only
    event: str | None = None         # the timeline event to append (run_retry_scheduled/skipped, ...)
    payload: dict[str, Any] = field(default_factory=dict)


class Action(StrEnum):
    LAUNCH = "launch"      # adopt the queued document and start it
    RESUME = "resume"      # continue from the checkpoint (a resume request, an interrupted run)
    TAKEOVER = "takeover"  # still `running`: its runner lost the lease (died); resume it


@dataclass(frozen=True)
class Claim:
    action: Action | None           # None: do not execute, dispose with ``drop``
    drop: Disposition | None = None


def delay_scale() -> float:
    """The factor on every re-offer delay (``$ITERION_QUEUE_DELAY_SCALE``, >= 0, default 1; garbage
    refused: gitrefs/persist/envsettings.py)."""
    return env_number(DELAY_SCALE_ENV, 1.0, what="a factor", example="0.01")


def redelivery_delay(code: str | None) -> float:
    """The table's re-offer delay for ``code`` (scaled); a code without one gets the default."""
    row = row_for(code) if code else None
    base = row.redelivery_delay_s if row is not None and row.redelivery_delay_s > 0 else TRANSIENT_DEFAULT_DELAY_S
    return base * delay_scale()


def retry_delay() -> float:
    return RETRY_DELAY_S * delay_scale()


def _dropped(reason: str, delivery: Delivery, message: str, **extra: Any) -> Claim:
    from iterion.store import events as ev

    return Claim(None, Disposition(Verb.ACK, reason, event=ev.RUN_DELIVERY_DROPPED,
                                   payload={"reason": reason, "kind": delivery.kind.value,
                                            "delivery": delivery.msg_id, "message": message, **extra}))


def _skipped(store: Store, run_id: str, code: str | None, error: str | None, name: str,
             status: RunStatus) -> Disposition:
    from iterion.engine.auto_resume import verdict_for
    from iterion.engine.result import RunResult
    from iterion.store import events as ev

    verdict = verdict_for(store, RunResult(run_id=run_id, name=name, status=status, failure_code=code, error=error))
    reason = "bot_defined" if verdict.classification == "bot_defined" else "deterministic"
    return Disposition(Verb.ACK, reason, event=ev.RUN_RETRY_SKIPPED,
                       payload={"reason": reason, "code": code, "error": error,
                                "classification": verdict.classification, "message": verdict.message,
                                "surface": "queue"})


def on_claim(store: Store, delivery: Delivery, doc: RunDoc, *, attempt: int,
             rewound_at: datetime | None) -> Claim:
    """What to do with a delivery for ``doc`` (read under the lease); ``attempt`` is the
    delivery's count (1 = first offer), ``rewound_at`` the time of the run's last ``run_rewound``."""
    status = doc.status
    redelivered = attempt > 1
    if delivery.kind is Kind.RESUME and not redelivered and delivery.expected_version is not None \
            and doc.version != delivery.expected_version:
        # another request (another server) moved the run since this one was made: exactly one runs
        return _dropped("stale_request", delivery,
                        f"the run changed since the request (version {delivery.expected_version} -> {doc.version})")
    if status is RunStatus.QUEUED:
        if delivery.kind is Kind.LAUNCH:
            return Claim(Action.LAUNCH)
        return _dropped("not_started", delivery, "the run is still queued: its launch delivery starts it")
    if status is RunStatus.RUNNING:
        return Claim(Action.TAKEOVER)
    if status in (RunStatus.FINISHED, RunStatus.FAILED):
        return _dropped(status.value, delivery, f"the run is already {status.value}")
    if doc.explicit_resume_required:
        real = delivery.kind is Kind.RESUME and not redelivered and (
            rewound_at is None or delivery.requested_at >= rewound_at)
        if not real:
            return _dropped("explicit_resume_required", delivery,
                            "the run was rewound: only a resume request made after the rewind continues it")
        return Claim(Action.RESUME)
    if status is RunStatus.FAILED_RESUMABLE:
        if delivery.kind is Kind.RESUME and not redelivered:
            return Claim(Action.RESUME)  # a person asked for it
        # a redelivery, or the launch delivery of a run that failed: the table decides, and a
        # bot-defined code is refused a second time (never synthesise a resume for it)
        from iterion.engine.auto_resume import verdict_for
        from iterion.engine.result import RunResult

        verdict = verdict_for(store, RunResult(run_id=doc.id, name=doc.name, status=status,
                                               failure_code=doc.failure_code, error=doc.error))
        if verdict.allowed:
            return Claim(Action.RESUME)
        return Claim(None, _skipped(store, doc.id, doc.failure_code, doc.error, doc.name, status))
    # paused_waiting_human, paused_operator, cancelled
    if delivery.kind is Kind.RESUME and not redelivered:
        return Claim(Action.RESUME)
    if doc.options.get(INTERRUPTED_OPTION):
        return Claim(Action.RESUME)  # a runner shut down mid-run and handed it back
    return _dropped(status.value, delivery, f"the run is {status.value}: only a resume request continues it")


def after_run(store: Store, result: RunResult, *, attempt: int, max_deliver: int,
              shutdown: bool) -> Disposition:
    """The disposition of an execution that returned ``result``."""
    from iterion.store import events as ev

    status = result.status
    if status is RunStatus.FINISHED:
        return Disposition(Verb.ACK, "finished")
    if status is RunStatus.PAUSED_WAITING_HUMAN:
        return Disposition(Verb.ACK, "paused")
    if status in (RunStatus.PAUSED_OPERATOR, RunStatus.CANCELLED):
        if shutdown:
            return Disposition(Verb.NAK, "shutdown", delay_s=SHUTDOWN_DELAY_S * delay_scale())
        return Disposition(Verb.ACK, "paused" if status is RunStatus.PAUSED_OPERATOR else "cancelled")
    if result.deliberate:
        return Disposition(Verb.ACK, "deliberate_failure")
    if status is RunStatus.FAILED:
        row = row_for(result.failure_code) if result.failure_code else None
        if row is not None:
            return _skipped(store, result.run_id, result.failure_code, result.error, result.name, status)
        return Disposition(Verb.ACK, "failed")
    if status is RunStatus.FAILED_RESUMABLE:
        if not _allowed(store, result):
            return _skipped(store, result.run_id, result.failure_code, result.error, result.name, status)
        if attempt >= max_deliver:
            return Disposition(Verb.PARK, "dlq", event=ev.RUN_DLQ_PARKED,
                               payload={"code": result.failure_code, "error": result.error,
                                        "deliveries": attempt, "max_deliver": max_deliver})
        delay = redelivery_delay(result.failure_code)
        return Disposition(Verb.NAK, "transient", delay_s=delay, event=ev.RUN_RETRY_SCHEDULED,
                           payload={"code": result.failure_code, "error": result.error, "delay_s": delay,
                                    "attempt": attempt + 1, "max_attempts": max_deliver, "surface": "queue"})
    return Disposition(Verb.ACK, status.value)


def _allowed(store: Store, result: RunResult) -> bool:
    from iterion.engine.auto_resume import verdict_for

    return verdict_for(store, result).allowed
