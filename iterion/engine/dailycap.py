"""The store-wide daily spend cap: its setting, the meter a run charges, the resume refusal.

The cap (USD) applies to what all runs of a store were charged since 00:00 UTC, counted in the
store (iterion/store/spend.py). It comes from ``--max-daily-cost-usd`` on ``resume`` (this
resume only), else ``$ITERION_DAILY_COST_CAP_USD`` (``iterion server`` / ``iterion runner
--max-daily-cost-usd`` set it for what they execute); unset or 0 means no cap. Every charge
with a cost is counted whether or not a cap is set, so a process that sets one sees the spend
of those that do not. A charge that reaches the cap parks the run ``paused_operator`` at that
charge point (``pause_reason: daily_cap`` on ``run_paused``); a resume of a run parked so is
refused while today's spend is still at or over the cap in effect.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from gitrefs.persist.envsettings import env_number
from gitrefs.persist.errors import ErrorKind
from iterion.budget import DailyCapReached, daily_cap_message, raised_daily_cap
from iterion.engine.errors import EngineError
from iterion.store import RunDoc, RunStatus
from iterion.store import events as ev
from iterion.store.spend import SpendCounter, SpendDay, new_charge_id, resets_at

CAP_ENV = "ITERION_DAILY_COST_CAP_USD"
FLAG = "--max-daily-cost-usd"
PAUSE_REASON = "daily_cap"
MAX_CAP = 1e12


def daily_cap(explicit: float | None = None) -> float | None:
    """The cap in effect: ``explicit`` (a flag) when given, else the environment; None = no cap."""
    if explicit is not None:
        if explicit < 0 or explicit != explicit:
            raise EngineError(f"{FLAG} must be a number >= 0, got {explicit}", hint=f"e.g. {FLAG} 25")
        return explicit or None
    value = env_number(CAP_ENV, 0.0, what="an amount in USD", maximum=MAX_CAP, example="25")
    return value or None


def export_cap(value: float | None) -> None:
    """``iterion server`` / ``iterion runner --max-daily-cost-usd``: the setting of every run the
    process executes, in this process or in the run processes it starts (they inherit it)."""
    if value is None:
        return
    if value < 0 or value != value:
        raise EngineError(f"{FLAG} must be a number >= 0, got {value}", hint=f"e.g. {FLAG} 25")
    os.environ[CAP_ENV] = repr(float(value))


def reset_text(day: SpendDay) -> str:
    return resets_at(day.day).strftime("%Y-%m-%dT%H:%M:%SZ")


class StoreDailyMeter:
    """What ``Budget.charge`` calls with a run's costs: the store's counter, against the cap.

    Without a cap the charge is still counted, best effort (a failed write is a warning, the run
    goes on); with one, a failed write propagates (the node fails with the storage error): a
    cap that cannot count must not let spending through unseen."""

    def __init__(self, counter: SpendCounter, cap: float | None, run_id: str,
                 warn: Callable[[str], None] = lambda _m: None) -> None:
        self.counter, self.cap, self.run_id, self._warn = counter, cap, run_id, warn
        self._warned = threading.Event()

    def record(self, cost_usd: float) -> None:
        try:
            day = self.counter.add(cost_usd, charge_id=new_charge_id(self.run_id))
        except Exception as exc:
            if self.cap is not None:
                raise
            if not self._warned.is_set():  # said once per execution, not at every call
                self._warned.set()
                self._warn(f"the store's daily spend counter could not be charged ({exc}); "
                           "today's spend is under-counted")
            return
        if self.cap is not None and day.spent_usd >= self.cap:
            raise DailyCapReached(self.cap, day.spent_usd, reset_text(day))


def paused_by_cap(events: list[ev.Event]) -> bool:
    """The run's last stop was a daily-cap pause (its last ``run_paused`` / ``run_resumed``)."""
    for e in reversed(events):
        if e.type == ev.RUN_RESUMED:
            return False
        if e.type == ev.RUN_PAUSED:
            return (e.payload or {}).get("pause_reason") == PAUSE_REASON
    return False


def check_daily_cap(doc: RunDoc, events: list[ev.Event], counter: SpendCounter, cap: float | None) -> None:
    """Refuse resuming a run parked by the daily cap while today's spend still reaches ``cap``."""
    if doc.status is not RunStatus.PAUSED_OPERATOR or not paused_by_cap(events):
        return
    if cap is None:
        return  # the cap was removed: nothing holds the run back
    day = counter.today()
    if day.spent_usd < cap:
        return
    message = daily_cap_message(cap, day.spent_usd, reset_text(day))
    raise EngineError(f"run {doc.id}: {message}",
                      hint=f"resume after the reset, or raise the cap: `iterion resume --run-id {doc.id} "
                           f"{FLAG} {raised_daily_cap(message)}` (or ${CAP_ENV})",
                      exit_code=ErrorKind.REFUSED)


def pause_payload(exc: DailyCapReached, restart: str | None) -> dict[str, Any]:
    return {"reason": exc.message, "by": PAUSE_REASON, "pause_reason": PAUSE_REASON, "restart_node": restart,
            "cap_usd": exc.cap, "spent_today_usd": exc.spent, "resets_at": exc.resets_at}
