"""Execution rows when the run stops while several executions are open (a fan-out the daily cap
or an operator pause cut short): the anchored one is paused, the others were interrupted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from iterion.server.timeline import executions
from iterion.store import Event
from iterion.store import events as ev

T0 = datetime(2026, 12, 7, tzinfo=UTC)


def _ev(seq: int, type_: str, node: str | None, it: int | None = 0, **payload: Any) -> Event:
    return Event(seq=seq, time=T0 + timedelta(seconds=seq), type=type_, node=node, iteration=it, payload=payload)


def test_a_pause_interrupts_the_other_open_branches_and_the_resume_adds_their_rows() -> None:
    events = [
        _ev(1, ev.NODE_STARTED, "a", kind="agent"),
        _ev(2, ev.NODE_STARTED, "b", kind="agent"),
        _ev(3, ev.RUN_PAUSED, "a", pause_reason="daily_cap"),
        # resumed: both branches re-execute
        _ev(4, ev.NODE_STARTED, "a", kind="agent"),
        _ev(5, ev.NODE_STARTED, "b", kind="agent"),
        _ev(6, ev.NODE_FINISHED, "a", output={"x": 1}),
        _ev(7, ev.NODE_FINISHED, "b", output={"y": 2}),
    ]
    rows = executions(events)
    by = [(r["node"], r["start_seq"], r["status"]) for r in rows]
    # a's paused row carries on as one row (as a gate's does); b's cut execution stays interrupted
    assert by == [("a", 1, "finished"), ("b", 2, "interrupted"), ("b", 5, "finished")]


def test_while_parked_no_row_claims_to_be_running() -> None:
    events = [
        _ev(1, ev.NODE_STARTED, "a", kind="agent"),
        _ev(2, ev.NODE_STARTED, "b", kind="agent"),
        _ev(3, ev.RUN_PAUSED, "a", pause_reason="daily_cap"),
    ]
    assert [(r["node"], r["status"]) for r in executions(events)] == [("a", "paused"), ("b", "interrupted")]
