"""The one failure-code table: every code the engine declares, with how it may be retried.

Everything that decides "bring this failure back automatically" reads this module: the CLI's
``--auto-resume`` gate, the recovery dispatcher, and the DSL's C248 check (a bot's ``fail``
node may not mint one of these codes). ``tests/test_failure_codes.py`` fails when a code is
declared without a row or a row names no declared code.

Besides the unattended-resume classification (``retry``), each row carries the recovery
dispatcher's columns (``engine/recovery.py``, consulted before a failed node's final status is
written): ``in_run_retries`` (re-executions in the run, with backoff), ``retry_origin`` (only
failures from there are retried: a backend call, or a model's answer) and ``pause`` (park a
recovery pause for a person).

The queue runner (``iterion/queue/policy.py``) reads one more column, ``redelivery_delay_s``: how
long a TRANSIENT failure waits before its delivery is offered again (a NAK with that delay). The
spec's sandbox rows are the reason it is a column: SANDBOX_SETUP_TIMEOUT is re-offered after 2
minutes (infrastructure catching its breath), SANDBOX_CAPACITY after longer (an autoscaler adding
a node); a bare re-offer would burn every permitted delivery back to back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureCode(StrEnum):
    # transient: a later attempt can succeed with nothing changed
    EXECUTION_FAILED = "EXECUTION_FAILED"
    TIMEOUT = "TIMEOUT"
    RATE_LIMITED = "RATE_LIMITED"
    USAGE_LIMIT_BLOCKED = "USAGE_LIMIT_BLOCKED"
    NETWORK_TRANSIENT = "NETWORK_TRANSIENT"
    TOOL_FAILED_TRANSIENT = "TOOL_FAILED_TRANSIENT"
    SANDBOX_SETUP_TIMEOUT = "SANDBOX_SETUP_TIMEOUT"
    SANDBOX_CAPACITY = "SANDBOX_CAPACITY"
    # transient only when the operator supplied a larger cap
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    # the verdict came from an LLM or a refreshed credential: may differ next time, but not
    # on the unattended allow-list
    SCHEMA_VALIDATION = "SCHEMA_VALIDATION"
    NO_OUTGOING_EDGE = "NO_OUTGOING_EDGE"
    AUTH_FAILED = "AUTH_FAILED"
    # the disk under the store or the workspace is full, over quota or read-only: a person frees
    # space (nothing is retried on its own), then an ordinary resume continues from the checkpoint
    STORAGE_UNWRITABLE = "STORAGE_UNWRITABLE"
    # deterministic: every attempt reaches the same verdict
    EXPRESSION_FAILED = "EXPRESSION_FAILED"
    CONTEXT_LENGTH_EXCEEDED = "CONTEXT_LENGTH_EXCEEDED"
    IR_UNLOADABLE = "IR_UNLOADABLE"
    REPO_NOT_FOUND = "REPO_NOT_FOUND"
    BOT_REQUIRES_NEWER_ENGINE = "BOT_REQUIRES_NEWER_ENGINE"
    WORKSPACE_SAFETY = "WORKSPACE_SAFETY"
    # the sandbox driver refused to start one (its program missing, namespaces refused, a bind
    # source gone): every attempt on this machine re-hits it until a person fixes the host
    SANDBOX_SETUP_FAILED = "SANDBOX_SETUP_FAILED"
    TOOL_FAILED_PERMANENT = "TOOL_FAILED_PERMANENT"
    # the provider refused the request itself (a 4xx, or a 500 whose body is a request-validation
    # error): the same request is refused again, so it is never retried
    REQUEST_REJECTED = "REQUEST_REJECTED"
    # an agent used up its tool_max_steps without answering: a cap, not a fault, and every retry
    # would spend the same number of model calls again, so only a person retries it
    TOOL_STEPS_EXHAUSTED = "TOOL_STEPS_EXHAUSTED"
    TEMPLATE_FAILED = "TEMPLATE_FAILED"
    BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
    SOURCE_CHANGED = "SOURCE_CHANGED"
    WORKFLOW_FAILED = "WORKFLOW_FAILED"
    CHECKPOINT_LOST = "CHECKPOINT_LOST"
    ORPHANED_RUN = "ORPHANED_RUN"
    CANCELLED = "CANCELLED"
    DLQ_PARKED = "DLQ_PARKED"
    # a repeat might duplicate a mutation that already landed
    AMBIGUOUS_EFFECT = "AMBIGUOUS_EFFECT"


class Retry(StrEnum):
    TRANSIENT = "transient"                    # auto-resumable as is
    NEEDS_RAISED_CAP = "needs_raised_cap"      # auto-resumable only with a larger cap supplied
    OPERATOR = "operator"                      # may differ next time, but only a person retries it
    DETERMINISTIC = "deterministic"            # same verdict on every attempt: parked
    AMBIGUOUS = "ambiguous"                    # a repeat may duplicate a mutation: parked


class Origin(StrEnum):
    """Where a failure must come from for the recovery dispatcher to retry it in the run."""

    ANY = "any"
    BACKEND = "backend"          # raised by an LLM backend call (not by the engine's own plumbing)
    LLM_VERDICT = "llm_verdict"  # decided from what a model answered: the next answer may differ


class Pause(StrEnum):
    """When the recovery dispatcher parks a failed node for a person (a recovery pause)."""

    NEVER = "never"
    ALWAYS = "always"
    OPT_IN = "opt_in"  # only when the launch asked for it (BUDGET_EXCEEDED: --on-budget pause)


@dataclass(frozen=True)
class FailureRow:
    code: FailureCode
    retry: Retry
    meaning: str
    # the recovery dispatcher (engine/recovery.py), before the final status is written: how many
    # times the failing node is re-executed in the run, and only for failures from which origin
    in_run_retries: int = 0
    retry_origin: Origin = Origin.ANY
    pause: Pause = Pause.NEVER
    # the queue runner: seconds before a transient failure's delivery is offered again
    redelivery_delay_s: float = 0.0


_ROWS: tuple[FailureRow, ...] = (
    FailureRow(FailureCode.EXECUTION_FAILED, Retry.TRANSIENT, "a node's execution failed for a reason a retry may clear",
               in_run_retries=2, retry_origin=Origin.BACKEND, redelivery_delay_s=30),
    FailureRow(FailureCode.TIMEOUT, Retry.TRANSIENT, "a node or call ran past its deadline", in_run_retries=1,
               redelivery_delay_s=30),
    FailureRow(FailureCode.RATE_LIMITED, Retry.TRANSIENT, "the provider asked us to slow down", in_run_retries=3,
               redelivery_delay_s=60),
    FailureRow(FailureCode.USAGE_LIMIT_BLOCKED, Retry.TRANSIENT, "a provider usage window is exhausted until it resets",
               redelivery_delay_s=900),
    FailureRow(FailureCode.NETWORK_TRANSIENT, Retry.TRANSIENT, "a connection failed before anything was sent",
               in_run_retries=3, redelivery_delay_s=30),
    FailureRow(FailureCode.TOOL_FAILED_TRANSIENT, Retry.TRANSIENT, "a tool exited with a temporary-failure status",
               in_run_retries=3, redelivery_delay_s=30),
    FailureRow(FailureCode.SANDBOX_SETUP_TIMEOUT, Retry.TRANSIENT, "a bounded setup phase ran and stalled",
               redelivery_delay_s=120),
    FailureRow(FailureCode.SANDBOX_CAPACITY, Retry.TRANSIENT, "no capacity to place the run; nothing executed",
               redelivery_delay_s=600),
    FailureRow(FailureCode.BUDGET_EXCEEDED, Retry.NEEDS_RAISED_CAP, "a budget cap was reached", pause=Pause.OPT_IN),
    FailureRow(FailureCode.SCHEMA_VALIDATION, Retry.OPERATOR, "a node's output did not match its schema",
               in_run_retries=2, retry_origin=Origin.LLM_VERDICT),
    FailureRow(FailureCode.NO_OUTGOING_EDGE, Retry.OPERATOR, "no edge condition matched the node's output",
               in_run_retries=2, retry_origin=Origin.LLM_VERDICT),
    FailureRow(FailureCode.AUTH_FAILED, Retry.OPERATOR, "the provider rejected the credential", pause=Pause.ALWAYS),
    FailureRow(FailureCode.STORAGE_UNWRITABLE, Retry.OPERATOR,
               "the store or workspace disk is full, over quota or read-only (ENOSPC, EDQUOT, EROFS)"),
    FailureRow(FailureCode.EXPRESSION_FAILED, Retry.DETERMINISTIC, "a compute expression failed on fixed inputs"),
    FailureRow(FailureCode.CONTEXT_LENGTH_EXCEEDED, Retry.DETERMINISTIC, "the conversation no longer fits the model"),
    FailureRow(FailureCode.IR_UNLOADABLE, Retry.DETERMINISTIC, "the workflow could not be loaded or compiled"),
    FailureRow(FailureCode.REPO_NOT_FOUND, Retry.DETERMINISTIC,
               "a queued run's repository or ref does not exist (failed at its first delivery, never re-offered)"),
    FailureRow(FailureCode.BOT_REQUIRES_NEWER_ENGINE, Retry.DETERMINISTIC, "the bundle needs a newer iterion"),
    FailureRow(FailureCode.WORKSPACE_SAFETY, Retry.DETERMINISTIC, "a write would have left the workspace"),
    FailureRow(FailureCode.SANDBOX_SETUP_FAILED, Retry.DETERMINISTIC,
               "the sandbox could not start (bubblewrap missing or refused); nothing ran unsandboxed"),
    FailureRow(FailureCode.TOOL_FAILED_PERMANENT, Retry.DETERMINISTIC, "a tool failed in a way a retry repeats"),
    FailureRow(FailureCode.REQUEST_REJECTED, Retry.DETERMINISTIC,
               "the provider refused the request as malformed or unsupported; a retry sends the same request"),
    FailureRow(FailureCode.TOOL_STEPS_EXHAUSTED, Retry.OPERATOR,
               "an agent reached tool_max_steps without a final answer; raise tool_max_steps or narrow the task"),
    FailureRow(FailureCode.TEMPLATE_FAILED, Retry.DETERMINISTIC, "a template reference could not be resolved"),
    FailureRow(FailureCode.BACKEND_UNAVAILABLE, Retry.DETERMINISTIC, "the selected backend is not installed or configured"),
    FailureRow(FailureCode.SOURCE_CHANGED, Retry.DETERMINISTIC, "the workflow source changed since launch"),
    FailureRow(FailureCode.WORKFLOW_FAILED, Retry.DETERMINISTIC, "the workflow reached the built-in fail terminal"),
    FailureRow(FailureCode.CHECKPOINT_LOST, Retry.DETERMINISTIC, "the checkpoint could not be persisted"),
    FailureRow(FailureCode.ORPHANED_RUN, Retry.OPERATOR, "a running run lost its owner and was promoted"),
    FailureRow(FailureCode.CANCELLED, Retry.OPERATOR, "the operator cancelled the run"),
    FailureRow(FailureCode.DLQ_PARKED, Retry.DETERMINISTIC, "every permitted delivery failed"),
    FailureRow(FailureCode.AMBIGUOUS_EFFECT, Retry.AMBIGUOUS, "a mutating call lost its answer; reconcile before resuming"),
)

TABLE: dict[FailureCode, FailureRow] = {row.code: row for row in _ROWS}


def reserved_failure_codes() -> frozenset[str]:
    """The codes a bot's ``fail`` node may not use (DSL diagnostic C248)."""
    return frozenset(code.value for code in FailureCode)


def is_reserved(code: str) -> bool:
    return code in reserved_failure_codes()


def row_for(code: str) -> FailureRow | None:
    try:
        return TABLE[FailureCode(code)]
    except ValueError:
        return None


@dataclass(frozen=True)
class AutoResumeDecision:
    allowed: bool
    reason: str


def auto_resume_decision(code: str | None, *, raised_cap: bool = False) -> AutoResumeDecision:
    """May an unattended surface bring a run that failed with ``code`` back on its own?"""
    if not code:
        return AutoResumeDecision(False, "no failure code recorded")
    row = row_for(code)
    if row is None:
        return AutoResumeDecision(False, f"not auto-recoverable (code {code})")
    if row.retry is Retry.TRANSIENT:
        return AutoResumeDecision(True, "transient")
    if row.retry is Retry.NEEDS_RAISED_CAP:
        if raised_cap:
            return AutoResumeDecision(True, "a larger cap was supplied")
        return AutoResumeDecision(False, f"{code} needs a larger cap (--max-*) before it can be retried")
    return AutoResumeDecision(False, row.retry.value)
