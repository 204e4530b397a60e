"""The store's daily spend counter: what all runs of one store were charged since 00:00 UTC.

The daily cap (``$ITERION_DAILY_COST_CAP_USD``, docs/user-guide.md "Daily spend cap") is checked
against it at every charge. One ``SpendDay`` document per UTC day:

- filesystem store: ``<store>/spend/<YYYY-MM-DD>.json``, rewritten atomically (temp + rename +
  fsync) under an exclusive flock on ``<YYYY-MM-DD>.lock`` beside it, so two processes charging
  at once serialise and neither charge is lost; the kernel drops the flock of a killed holder;
- JetStream: the KV bucket ``<prefix>_spend`` (iterion/store/jetstream/spend.py), key = the day,
  updated with a revision-checked compare-and-swap, retried.

A charge carries an id; the last ``RECENT`` ids are kept in the document, so a write retried
after an answer that never came (JetStream) is not counted twice. What a SIGKILL can leave is
in docs/technical/daily-cap.md.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Protocol

from gitrefs.persist.filelock import file_lock
from gitrefs.persist.model import VersionedModel, read_model, write_model
from iterion.store.errors import CorruptDocumentError
from iterion.store.timeutil import utcnow

SPEND_DIR = "spend"
RECENT = 64  # charge ids remembered per day: far more than the writers that can retry at once


class SpendDay(VersionedModel):
    """Today's spend of a store (one UTC day)."""

    FORMAT_VERSION = 1

    day: str                                 # YYYY-MM-DD (UTC)
    spent_usd: float = 0.0
    charges: int = 0
    recent: list[str] = []                   # the last RECENT charge ids (exactly-once retries)

    def with_charge(self, cost_usd: float, charge_id: str) -> SpendDay:
        """This day plus one charge (unchanged when ``charge_id`` is already counted)."""
        if charge_id in self.recent:
            return self
        return self.model_copy(update={"spent_usd": self.spent_usd + cost_usd, "charges": self.charges + 1,
                                       "recent": [*self.recent, charge_id][-RECENT:]})


def utc_day(now: datetime | None = None) -> str:
    return (now or utcnow()).astimezone(timezone.utc).strftime("%Y-%m-%d")


def resets_at(day: str) -> datetime:
    """When ``day``'s counter stops applying: the next 00:00 UTC."""
    start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    return start + timedelta(days=1)


def unreadable(where: str, exc: ValueError) -> CorruptDocumentError:
    detail = str(exc).splitlines()[-1].strip() if str(exc) else type(exc).__name__
    if "format_version" in str(exc) and "newer" in str(exc):
        detail = "written by a newer iterion; upgrade iterion"
    return CorruptDocumentError(f"the store's daily spend counter {where} is unreadable ({detail})",
                                detail=detail, hint="upgrade iterion, or delete it to count today's spend from $0")


def new_charge_id(run_id: str) -> str:
    return f"{run_id}:{uuid.uuid4().hex[:16]}"


class SpendCounter(Protocol):
    def add(self, cost_usd: float, *, charge_id: str, now: datetime | None = None) -> SpendDay:
        """Add one charge to today's spend (atomically); the day after the charge."""

    def today(self, now: datetime | None = None) -> SpendDay:
        """Today's spend (a zero day when nothing was charged yet)."""


class FileSpendCounter:
    """The counter of a filesystem store (see the module doc)."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / SPEND_DIR

    def _path(self, day: str) -> Path:
        return self.dir / f"{day}.json"

    def _read(self, day: str) -> SpendDay:
        try:
            return read_model(self._path(day), SpendDay)
        except FileNotFoundError:
            return SpendDay(day=day)
        except ValueError as exc:
            raise unreadable(str(self._path(day)), exc) from None

    def add(self, cost_usd: float, *, charge_id: str, now: datetime | None = None) -> SpendDay:
        if cost_usd < 0:
            raise ValueError("a charge cannot be negative")
        day = utc_day(now)
        with file_lock(self.dir / f"{day}.lock"):
            after = self._read(day).with_charge(cost_usd, charge_id)
            write_model(self._path(day), after)
        return after

    def today(self, now: datetime | None = None) -> SpendDay:
        return self._read(utc_day(now))
