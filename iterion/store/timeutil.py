"""UTC timestamps for persisted documents (timezone-aware, so JSON carries the offset)."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def as_utc(stamp: datetime) -> datetime:
    """``stamp`` with a timezone: a naive one (a hand-edited or foreign document; ours always
    carry their offset) is read as UTC, so comparing it with now never raises."""
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=timezone.utc)
