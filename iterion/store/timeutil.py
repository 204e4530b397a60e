"""UTC timestamps for persisted documents (timezone-aware, so JSON carries the offset)."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
