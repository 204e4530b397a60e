"""The recovery dispatcher: what happens to a failed node BEFORE the run's final status is written.

A recovery policy may retry, or ask a human, before the final status is written (docs/user-guide.md
"Resume"; durability.md section 3). The runner consults it once per failure of a node's execution; ONE decision per
(failure code, attempt), read from the failure-code table (``failure_codes``: its
``in_run_retries``, ``retry_origin`` and ``pause`` columns) and the launch's policy:

* **retry** in the run, after a bounded exponential backoff (a provider's ``retry_after_s``
  honoured when it is longer): the transient codes, and the codes whose verdict came from what
  a model answered (SCHEMA_VALIDATION, NO_OUTGOING_EDGE), which "keep their retries";
* **pause** for a person (``paused_waiting_human`` with a ``recovery`` interaction whose
  synthetic question is ``acknowledge_recovery``): AUTH_FAILED always, BUDGET_EXCEEDED when the
  launch opted in (``--on-budget pause``; the default ``fail`` keeps ``failed_resumable``);
* **fail**: everything else - deterministic codes, AMBIGUOUS_EFFECT (a repeat may duplicate a
  mutation: reconcile first), retries exhausted - and the runner parks ``failed_resumable``.

Attempts are the checkpoint's per-(node, code) counters. They count every failure of that node
with that code over the run's life (they are never reset, and survive pauses and resumes), so a
second identical failure after a recovery pause is judged as the second attempt, and the retry
limits are a per-run allowance per (node, code), not per execution.

``ITERION_RETRY_BACKOFF_S`` overrides the first in-run backoff delay. It exists for tests only
(a test cannot wait seconds per retry); do not set it in production.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gitrefs.boundary import BoundaryKind
from iterion.budget import OnBudget as OnBudget  # its home is iterion.budget (the CLI's flag type)
from iterion.engine.auto_resume import Backoff
from iterion.engine.dailycap import daily_cap
from iterion.engine.errors import Cancelled, NodeFailure, RecoveryPause
from iterion.engine.stop import Ask, Emit, Lost, Mark, Stop, stop_run
from iterion.failure_codes import Origin, Pause, Retry, row_for
from iterion.ir import Node, NodeKind, RouterMode
from iterion.store import AnchorReason, RunStatus
from iterion.store import events as ev

if TYPE_CHECKING:
    from iterion.engine.context import ExecContext
    from iterion.engine.result import RunResult
    from iterion.engine.stop import StopHost

RETRY_BACKOFF_ENV = "ITERION_RETRY_BACKOFF_S"
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
# a provider asking for a longer wait than this: the run parks failed_resumable (where
# --auto-resume can wait it out) instead of holding its lock asleep
MAX_RETRY_AFTER_S = 120.0
# recovery pauses of one (node, code) before the failure is left to stand as failed_resumable
MAX_RECOVERY_PAUSES = 3
ACK_FIELD = "acknowledge_recovery"


class Action(StrEnum):
    RETRY = "retry"
    PAUSE = "pause"
    FAIL = "fail"


@dataclass(frozen=True)
class RecoveryPolicy:
    on_budget: OnBudget = OnBudget.FAIL
    backoff: Backoff = field(default_factory=lambda: Backoff(base_s=BACKOFF_BASE_S, max_s=BACKOFF_MAX_S))
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    max_pauses: int = MAX_RECOVERY_PAUSES

    @classmethod
    def from_env(cls, on_budget: str | None = None) -> RecoveryPolicy:
        known = {o.value for o in OnBudget}  # an unknown persisted value keeps the default
        return cls(on_budget=OnBudget(on_budget if on_budget in known else OnBudget.FAIL.value),
                   backoff=Backoff.from_env(RETRY_BACKOFF_ENV, base_s=BACKOFF_BASE_S, max_s=BACKOFF_MAX_S))


def check_env_settings(*, auto_resume: bool = False) -> None:
    """Read now the environment numbers a run reads later (``$ITERION_RETRY_BACKOFF_S``; with
    ``auto_resume`` also ``$ITERION_AUTO_RESUME_BACKOFF_S``): a garbage value refuses the launch or
    resume in one line (EnvSettingError) before anything is written, instead of failing inside
    the run where the dispatcher is built."""
    RecoveryPolicy.from_env()
    daily_cap()  # $ITERION_DAILY_COST_CAP_USD (iterion/engine/dailycap.py)
    if auto_resume:
        Backoff.from_env()


@dataclass(frozen=True)
class Decision:
    action: Action
    code: str
    attempt: int             # this failure's number for (node, code), 1-based
    max_retries: int         # the table's in-run retries for the code (0: none)
    reason: str
    delay_s: float = 0.0     # RETRY: how long to wait first
    origin: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action.value, "code": self.code, "attempt": self.attempt,
                "max_retries": self.max_retries, "reason": self.reason, "delay_s": self.delay_s,
                "origin": self.origin}


def failure_origin(node: Node, exc: NodeFailure) -> str | None:
    """Where ``exc`` came from, as the table's ``retry_origin`` reads it: ``llm_verdict`` for an
    output/routing verdict decided from what a model answered, ``backend`` for another failure an
    LLM backend call raised, None for the engine's own plumbing (never retried by origin)."""
    from_model = node.kind in (NodeKind.AGENT, NodeKind.JUDGE) or (
        node.kind is NodeKind.ROUTER and node.mode is RouterMode.LLM)
    row = row_for(exc.code)
    if row is not None and row.retry_origin is Origin.LLM_VERDICT and (exc.origin == "backend" or from_model):
        return Origin.LLM_VERDICT.value
    return exc.origin


def decide(code: str, attempt: int, *, origin: str | None = None, retry_after_s: float | None = None,
           policy: RecoveryPolicy | None = None, can_pause: bool = True) -> Decision:
    """The one recovery decision for failure number ``attempt`` of a (node, ``code``)."""
    policy = policy or RecoveryPolicy()
    row = row_for(code)
    if row is None:
        return Decision(Action.FAIL, code, attempt, 0, f"not auto-recoverable (code {code})", origin=origin)
    retries = row.in_run_retries
    if row.retry is Retry.AMBIGUOUS:
        return Decision(Action.FAIL, code, attempt, 0, "a repeat may duplicate a mutation that already "
                        "landed; reconcile the remote state before resuming", origin=origin)
    if row.retry is Retry.DETERMINISTIC:
        return Decision(Action.FAIL, code, attempt, 0,
                        "deterministic: every attempt reaches the same verdict", origin=origin)
    eligible = row.retry_origin is Origin.ANY or origin == row.retry_origin.value
    why_not = ""
    if retries and not eligible:
        why_not = f"{code} is retried in the run only when it comes from {row.retry_origin.value}"
    elif retries and attempt > retries:
        why_not = f"in-run retries exhausted ({retries})"
    elif retries and retry_after_s is not None and retry_after_s > policy.max_retry_after_s:
        why_not = (f"the provider asked to wait {retry_after_s:g}s, longer than the in-run ceiling of "
                   f"{policy.max_retry_after_s:g}s")
    elif retries:
        delay = policy.backoff.delay(attempt)
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        why = ("transient" if row.retry is Retry.TRANSIENT
               else "the verdict came from a model's answer and may differ")
        return Decision(Action.RETRY, code, attempt, retries, why, delay_s=delay, origin=origin)
    pause = row.pause is Pause.ALWAYS or (row.pause is Pause.OPT_IN and policy.on_budget is OnBudget.PAUSE)
    if pause and can_pause and attempt <= policy.max_pauses:
        return Decision(Action.PAUSE, code, attempt, retries, "a person must fix the cause, then acknowledge",
                        origin=origin)
    if pause and not can_pause:
        why_not = "a fan-out branch cannot pause for a person"
    elif pause:
        why_not = f"recovery pauses exhausted ({policy.max_pauses})"
    return Decision(Action.FAIL, code, attempt, retries, why_not or "no in-run recovery for this code",
                    origin=origin)


class RecoveryDispatcher:
    """The runner's handle: counts the attempt, decides, puts the decision on the timeline."""

    def __init__(self, ctx: ExecContext, policy: RecoveryPolicy | None = None) -> None:
        self.ctx = ctx
        self.policy = policy or RecoveryPolicy.from_env(ctx.options.on_budget)

    def on_failure(self, node: Node, iteration: int, exc: NodeFailure, *, can_pause: bool = True) -> Decision:
        st = self.ctx.state
        with st.lock:  # fan-out branches fail concurrently
            per_node = st.recovery_attempts.setdefault(node.id, {})
            per_node[exc.code] = attempt = per_node.get(exc.code, 0) + 1
        decision = decide(exc.code, attempt, origin=failure_origin(node, exc),
                          retry_after_s=exc.retry_after_s, policy=self.policy, can_pause=can_pause)
        payload = {**decision.to_json(), "error": exc.message}
        if decision.action is Action.RETRY:
            self.ctx.emit(ev.NODE_RETRY_SCHEDULED, node.id, iteration,
                          {**payload, "retry_after_s": exc.retry_after_s})
        elif decision.action is Action.FAIL:
            self.ctx.emit(ev.RECOVERY_DECLINED, node.id, iteration, payload)
        return decision  # a PAUSE is announced once parked (recovery_paused names the interaction)

    def wait(self, decision: Decision) -> None:
        """The backoff before a retry; a cancel during it ends the wait (and the run) at once."""
        if decision.delay_s > 0 and self.ctx.token.wait(decision.delay_s):
            raise Cancelled(self.ctx.token.reason or "cancelled")
        self.ctx.token.check()


_FIX = {"AUTH_FAILED": "fix the credential the provider rejected",
        "BUDGET_EXCEEDED": "raise the cap on the resume "
                           "(--max-cost-usd/--max-tokens/--max-duration/--max-iterations)"}


def recovery_questions(code: str, error: str, attempt: int) -> dict[str, Any]:
    """The synthetic question of a recovery pause (``fields`` lets every surface prompt for it)."""
    fix = _FIX.get(code, "fix the cause")
    return {
        ACK_FIELD: f"{fix}, then acknowledge to retry the node",
        "recovery_code": code,
        "last_error": error,
        "attempt": attempt,
        "instructions": f"The node failed with {code}: {error}. To retry it, {fix} and answer {ACK_FIELD} "
                        "(the node re-executes; the answer is kept as the record of what was fixed).",
        "fields": [{"name": ACK_FIELD, "type": "string"}],
    }


def park_recovery(host: StopHost, pause: RecoveryPause) -> RunResult:
    """Park ``paused_waiting_human`` on a ``recovery`` interaction, anchored at the failed node
    (the resume re-executes it). The failure's code and error stay on the run while it waits."""
    failure, node, it = pause.failure, pause.node, pause.iteration
    code = failure.code
    questions = recovery_questions(code, failure.message, pause.decision.attempt)
    return stop_run(host, Stop(
        RunStatus.PAUSED_WAITING_HUMAN, code, failure.message,
        mark=Mark(BoundaryKind.PAUSE, node, it, best_effort=True),  # the fail: boundary already closed the node
        ask=Ask(node, it, "recovery", questions),
        anchor=AnchorReason.RECOVERY_PAUSE, restart=node, iteration=it, recovery_code=code,
        lost=Lost(code, failure.message),
        events=lambda c: [
            Emit(ev.RECOVERY_PAUSED, node, it, {**pause.decision.to_json(), "error": failure.message,
                                                "interaction_id": c.interaction_id}),
            Emit(ev.RUN_PAUSED, node, it, {"interaction_id": c.interaction_id, "by": "recovery",
                                           "recovery_code": code})]))
