"""``--auto-resume N``: bring a ``failed_resumable`` run back on its own, up to N times.

Only what the failure-code table allows is retried (``failure_codes.auto_resume_decision``, the
one table every "retry this automatically" surface reads): the transient codes, and
BUDGET_EXCEEDED only when a cap larger than the one that stopped the run is in force. Each retry
waits a bounded exponential backoff and is announced with ``run_retry_scheduled``; a declined one
is announced with ``run_retry_skipped {reason: deterministic, code, error}`` so a parked run that
was deliberately not retried does not read like one still waiting. A bot-defined code (a ``fail``
node's own) is never retried and the log says "not auto-recoverable (code X)".

``ITERION_AUTO_RESUME_BACKOFF_S`` overrides the first delay (tests only).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gitrefs.persist.envsettings import env_seconds
from iterion.engine.cancel import CancelToken
from iterion.engine.notice import Listener, notifier
from iterion.engine.result import RunResult
from iterion.failure_codes import FailureCode, Retry, auto_resume_decision, row_for
from iterion.store import RunStatus, Store
from iterion.store import events as ev

BACKOFF_ENV = "ITERION_AUTO_RESUME_BACKOFF_S"
_AXIS_FIELD = {"max_duration": "max_duration_s"}


@dataclass(frozen=True)
class Backoff:
    """Delay before retry ``attempt`` (1-based): base * factor**(attempt-1), never above max_s."""

    base_s: float = 2.0
    factor: float = 2.0
    max_s: float = 60.0

    def delay(self, attempt: int) -> float:
        return min(self.max_s, self.base_s * self.factor ** max(0, attempt - 1))

    @classmethod
    def from_env(cls, env: str = BACKOFF_ENV, *, base_s: float | None = None,
                 max_s: float | None = None) -> Backoff:
        """This shape with ``base_s``/``max_s`` (default: the class's); ``$env`` (seconds >= 0)
        overrides the base; a garbage value raises EnvSettingError (gitrefs/persist/envsettings.py)."""
        default = cls.base_s if base_s is None else base_s
        return cls(base_s=env_seconds(env, default), max_s=cls.max_s if max_s is None else max_s)


@dataclass(frozen=True)
class RetryVerdict:
    allowed: bool
    code: str | None
    classification: str   # the table's retry class, or "bot_defined" for a code outside the table
    message: str


def raised_since_failure(store: Store, run_id: str) -> bool:
    """Is the cap of the axis that stopped the run larger now than when it stopped?"""
    doc = store.load_run(run_id)
    for event in reversed(store.read_events(run_id)):
        if event.type == ev.BUDGET_EXCEEDED:
            exceeded = ev.payload(event, ev.BudgetExceededPayload)
            axis = str(exceeded.get("axis") or "")
            cap = exceeded.get("cap")
            now = getattr(doc.budget, _AXIS_FIELD.get(axis, axis), None)
            return isinstance(cap, (int, float)) and isinstance(now, (int, float)) and now > cap
    return False


def verdict_for(store: Store, result: RunResult) -> RetryVerdict:
    code = result.failure_code
    raised = code == FailureCode.BUDGET_EXCEEDED.value and raised_since_failure(store, result.run_id)
    decision = auto_resume_decision(code, raised_cap=raised)
    row = row_for(code) if code else None
    if row is None:
        # a bot's own code: the run refused on purpose, only an operator can change the verdict
        return RetryVerdict(decision.allowed, code, "bot_defined", f"not auto-recoverable (code {code})")
    if decision.allowed:
        return RetryVerdict(True, code, row.retry.value, decision.reason)
    if row.retry is Retry.AMBIGUOUS:
        why = "a repeat may duplicate a mutation that already landed; reconcile the remote state first"
    elif row.retry is Retry.NEEDS_RAISED_CAP:
        why = "no larger cap is in force; resume with a raised --max-* cap"
    elif row.retry is Retry.OPERATOR:
        why = "only an operator retries it"
    else:
        why = "every attempt reaches the same verdict"
    return RetryVerdict(False, code, row.retry.value, f"not auto-recoverable (code {code}): {why}")


def auto_resume(store: Store, result: RunResult, retries: int, *, resume: Callable[[], RunResult],
                token: CancelToken | None = None, backoff: Backoff | None = None,
                listener: Listener | None = None, log: Callable[[str], None] | None = None) -> RunResult:
    """Retry ``result``'s run while it ends ``failed_resumable`` with an allowed code, at most
    ``retries`` times; ``resume`` performs one resume and returns its result. What it decides is
    told to ``log``, by default the run's ``listener`` (iterion/engine/notice.py)."""
    log = log or notifier(listener)
    backoff = backoff or Backoff.from_env()
    attempt = 0
    while result.status is RunStatus.FAILED_RESUMABLE and retries > 0:
        log_ = store.events(result.run_id)
        verdict = verdict_for(store, result)
        if not verdict.allowed:
            log_.append(ev.RUN_RETRY_SKIPPED, payload={
                "reason": "deterministic", "code": verdict.code, "error": result.error,
                "classification": verdict.classification, "message": verdict.message})
            log(f"run {result.run_id}: {verdict.message}")
            return result
        if attempt >= retries:
            log_.append(ev.RUN_RETRY_SKIPPED, payload={
                "reason": "attempts_exhausted", "code": verdict.code, "error": result.error,
                "classification": verdict.classification, "attempts": attempt, "max_attempts": retries})
            log(f"run {result.run_id}: still failing with {verdict.code} after {attempt} automatic "
                f"resume(s); left failed_resumable")
            return result
        attempt += 1
        delay = backoff.delay(attempt)
        log_.append(ev.RUN_RETRY_SCHEDULED, payload={
            "attempt": attempt, "max_attempts": retries, "delay_s": delay, "code": verdict.code,
            "error": result.error, "classification": verdict.classification})
        log(f"run {result.run_id}: {verdict.code} is retryable; automatic resume {attempt}/{retries} in {delay:g}s")
        if token is not None:
            if token.wait(delay):
                return result
        else:
            time.sleep(delay)
        result = resume()
    return result
