"""Run budget: caps, the consumption every branch shares, and the resume-time merge of caps.

Caps are a ``BudgetAsk`` (0 on a field = no cap / inherit). Consumption is a ``Usage``; it is
what the checkpoint persists, so a resume restores it instead of starting a fresh budget.
``Budget`` is shared by all parallel branches of a run and is thread-safe.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

# the one duration grammar lives in iterion/durations.py; a run's cap takes a bare number as
# seconds there (--max-duration 45); re-exported: the CLI and the server import them from here
from iterion.durations import DurationError as DurationError
from iterion.durations import format_duration as format_duration
from iterion.durations import parse_duration as parse_duration
from iterion.failure_codes import FailureCode

if TYPE_CHECKING:  # only a parameter type: the store's models import this module, and the CLI lists runs without the IR
    from iterion import ir

AXES = ("max_tokens", "max_cost_usd", "max_duration", "max_iterations", "max_parallel_branches")

class OnBudget(StrEnum):
    """What a BUDGET_EXCEEDED node does: park failed_resumable (default) or pause for a person.

    Lives here (not in the engine's recovery dispatcher, which uses it) so `iterion run --help`
    and the CLI's option types need no engine import."""

    FAIL = "fail"
    PAUSE = "pause"


class BudgetAsk(BaseModel):
    """Caps asked for a run. 0 means "no cap" on launch and "inherit" in an override."""

    model_config = ConfigDict(extra="ignore")

    max_tokens: int = 0
    max_cost_usd: float = 0.0
    max_duration_s: float = 0.0
    max_iterations: int = 0
    max_parallel_branches: int = 0

    @model_validator(mode="before")
    @classmethod
    def _accept_duration_text(cls, data: Any) -> Any:
        # the wire/CLI form is {"max_duration": "4h"}; persisted form is seconds
        if isinstance(data, dict) and "max_duration" in data:
            data = dict(data)
            raw = data.pop("max_duration")
            if raw not in (None, "", 0) and "max_duration_s" not in data:
                data["max_duration_s"] = parse_duration(raw)
        if isinstance(data, dict):
            data = {k: (0 if v is None else v) for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _non_negative(self) -> BudgetAsk:
        for name in ("max_tokens", "max_cost_usd", "max_duration_s", "max_iterations", "max_parallel_branches"):
            v = getattr(self, name)
            if v < 0 or (isinstance(v, float) and not math.isfinite(v)):
                raise ValueError(f"budget {name} must be a finite non-negative number, got {v}")
        return self

    @classmethod
    def from_ir(cls, budget: ir.Budget) -> BudgetAsk:
        return cls(max_tokens=budget.max_tokens or 0, max_cost_usd=budget.max_cost_usd or 0.0,
                   max_duration_s=budget.max_duration_s or 0.0, max_iterations=budget.max_iterations or 0,
                   max_parallel_branches=budget.max_parallel_branches or 0)

    def is_empty(self) -> bool:
        return not any(getattr(self, f) for f in type(self).model_fields)


def merge_ask(launch: BudgetAsk, override: BudgetAsk | None) -> BudgetAsk:
    """Per field: a non-zero ``override`` wins, a zero one inherits ``launch``."""
    if override is None:
        return launch.model_copy()
    return BudgetAsk(**{f: (getattr(override, f) or getattr(launch, f)) for f in BudgetAsk.model_fields})


def raised_axes(before: BudgetAsk, after: BudgetAsk) -> set[str]:
    """Fields whose cap ``after`` raises over ``before`` (removing a cap, 0, is not a raise here)."""
    out: set[str] = set()
    for f in BudgetAsk.model_fields:
        b, a = getattr(before, f), getattr(after, f)
        if b and a > b:
            out.add(f)
    return out


class Usage(BaseModel):
    """Consumption so far. Persisted in the checkpoint; a legacy checkpoint without it reads zeros."""

    model_config = ConfigDict(extra="ignore")

    tokens: int = 0
    cost_usd: float = 0.0
    iterations: int = 0
    active_duration_s: float = 0.0
    # spend across every attempt of the run (never refunded, not even by a rewind)
    cumulative_cost_usd: float = 0.0


class BudgetExceeded(Exception):
    """A cap was reached. ``code`` is BUDGET_EXCEEDED; ``axis`` is the AXES name."""

    code = FailureCode.BUDGET_EXCEEDED

    def __init__(self, axis: str, cap: float, consumed: float) -> None:
        self.axis, self.cap, self.consumed = axis, cap, consumed
        if axis == "max_duration":
            shown_cap, shown_used = format_duration(cap), format_duration(consumed)
        elif axis == "max_cost_usd":
            shown_cap, shown_used = f"${cap:g}", f"${consumed:.4f}".rstrip("0").rstrip(".")
        else:
            shown_cap, shown_used = f"{cap:g}", f"{consumed:g}"
        self.message = (f"budget exceeded: {axis} cap {shown_cap} reached (consumed {shown_used}); "
                        f"resume with a larger --{axis.replace('_', '-')}")
        super().__init__(self.message)


class DailyCapReached(Exception):
    """The store's daily spend cap is reached (``$ITERION_DAILY_COST_CAP_USD``): the run parks
    ``paused_operator`` at this charge point. ``resets_at`` is the next 00:00 UTC (ISO text)."""

    def __init__(self, cap: float, spent: float, resets_at: str) -> None:
        self.cap, self.spent, self.resets_at = cap, spent, resets_at
        self.message = daily_cap_message(cap, spent, resets_at)
        super().__init__(self.message)


def daily_cap_message(cap: float, spent: float, resets_at: str) -> str:
    """The one wording of a reached daily cap (the pause reason and the resume refusal)."""
    shown = f"${spent:.4f}".rstrip("0").rstrip(".")
    return f"daily spend cap ${cap:g} reached: {shown} spent today by the runs of this store (resets {resets_at})"


_DAILY_RE = re.compile(r"daily spend cap \$([0-9.e+]+) reached: \$([0-9.e+]+) spent today")


def raised_daily_cap(text: str | None) -> str | None:
    """The ``--max-daily-cost-usd`` value to suggest for a reached daily cap named in ``text``
    (twice today's spend, at least $1), or None when ``text`` names none."""
    m = _DAILY_RE.search(text or "")
    if not m:
        return None
    try:
        spent = float(m.group(2))
    except ValueError:
        return None
    return f"{max(1.0, spent * 2):.2f}".rstrip("0").rstrip(".")


class DailyMeter(Protocol):
    """The store's daily spend, charged by every run (iterion/engine/dailycap.py)."""

    def record(self, cost_usd: float) -> None:
        """Add ``cost_usd`` to today's spend; raise DailyCapReached once it reaches the cap."""


class Budget:
    """Caps plus shared, thread-safe consumption of one run."""

    def __init__(self, ask: BudgetAsk | None = None, *, usage: Usage | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._ask = ask or BudgetAsk()
        self._usage = (usage or Usage()).model_copy()
        self._active = 0  # how many branches currently execute; the clock runs while > 0
        self._active_since = 0.0
        self._slots: threading.BoundedSemaphore | None = None
        self._set_slots()
        self._daily: DailyMeter | None = None

    def attach_daily(self, meter: DailyMeter | None) -> None:
        """Charge the store's daily spend too, at every charge (None: only this run's caps)."""
        self._daily = meter

    # -- caps -------------------------------------------------------------------------------------
    @property
    def ask(self) -> BudgetAsk:
        return self._ask.model_copy()

    def set_ask(self, ask: BudgetAsk) -> None:
        """Replace the caps (a resume override); consumption is kept."""
        with self._lock:
            self._ask = ask
        self._set_slots()

    def _set_slots(self) -> None:
        n = self._ask.max_parallel_branches
        self._slots = threading.BoundedSemaphore(n) if n else None

    # -- consumption -----------------------------------------------------------------------------
    def restore(self, usage: Usage) -> None:
        """Load consumption from a checkpoint (the clock is not running afterwards)."""
        with self._lock:
            self._usage = usage.model_copy()
            if self._active:
                self._active_since = self._clock()

    def _elapsed_locked(self) -> float:
        extra = self._clock() - self._active_since if self._active else 0.0
        return self._usage.active_duration_s + extra

    def usage(self) -> Usage:
        """A snapshot including the active time accrued up to now (what the checkpoint stores)."""
        with self._lock:
            return self._usage.model_copy(update={"active_duration_s": self._elapsed_locked()})

    def charge(self, *, tokens: int = 0, cost_usd: float = 0.0, count_daily: bool = True) -> None:
        """Record what a call consumed (always recorded: it was spent), then raise if over a cap.

        The charge point of the daily cap too: the store's counter is charged after this run's
        usage (outside the lock: it is a write), and a reached daily cap is raised after this
        run's own caps were checked (a BUDGET_EXCEEDED names the more specific cause)."""
        if tokens < 0 or cost_usd < 0:
            raise ValueError("a charge cannot be negative")
        with self._lock:
            self._usage.tokens += tokens
            self._usage.cost_usd += cost_usd
            self._usage.cumulative_cost_usd += cost_usd
        daily: DailyCapReached | None = None
        if self._daily is not None and cost_usd > 0 and count_daily:  # (False: a subbot child charged it already)
            try:
                self._daily.record(cost_usd)
            except DailyCapReached as exc:
                daily = exc
        with self._lock:
            self._check_locked()
        if daily is not None:
            raise daily

    def add_iteration(self, n: int = 1) -> None:
        """Count node executions against max_iterations; raises once the count passes the cap."""
        with self._lock:
            self._usage.iterations += n
            self._check_locked()

    def check(self) -> None:
        """Raise BudgetExceeded if any consumption is past its cap (duration included)."""
        with self._lock:
            self._check_locked()

    def _check_locked(self) -> None:
        a, u = self._ask, self._usage
        if a.max_tokens and u.tokens > a.max_tokens:
            raise BudgetExceeded("max_tokens", a.max_tokens, u.tokens)
        if a.max_cost_usd and u.cost_usd > a.max_cost_usd:
            raise BudgetExceeded("max_cost_usd", a.max_cost_usd, u.cost_usd)
        if a.max_iterations and u.iterations > a.max_iterations:
            raise BudgetExceeded("max_iterations", a.max_iterations, u.iterations)
        if a.max_duration_s:
            elapsed = self._elapsed_locked()
            if elapsed > a.max_duration_s:
                raise BudgetExceeded("max_duration", a.max_duration_s, elapsed)

    def remaining_duration(self) -> float | None:
        """Seconds of active time left under max_duration (None without that cap)."""
        with self._lock:
            if not self._ask.max_duration_s:
                return None
            return max(0.0, self._ask.max_duration_s - self._elapsed_locked())

    # -- active time -----------------------------------------------------------------------------
    @contextmanager
    def active(self) -> Iterator[None]:
        """Count wall time while at least one branch executes (parallel branches count once)."""
        with self._lock:
            if self._active == 0:
                self._active_since = self._clock()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._usage.active_duration_s += self._clock() - self._active_since

    # -- parallelism -----------------------------------------------------------------------------
    @contextmanager
    def branch_slot(self, *, block: bool = True) -> Iterator[None]:
        """Hold one of max_parallel_branches slots while a branch runs (no cap: no limit).

        ``block=False`` raises BudgetExceeded instead of waiting when every slot is taken.
        """
        slots = self._slots
        if slots is None:
            yield
            return
        if not slots.acquire(blocking=block):
            raise BudgetExceeded("max_parallel_branches", self._ask.max_parallel_branches,
                                 self._ask.max_parallel_branches + 1)
        try:
            yield
        finally:
            slots.release()
