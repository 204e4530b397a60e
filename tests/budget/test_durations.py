"""The one duration grammar (iterion/durations.py) and its three callers: a run's cap
(iterion.budget: a bare number is seconds), the DSL's max_duration string (a unit required,
unreadable -> None) and `gc --older-than` (a unit required; any case, a space before the unit).
They agree on every form with units and differ only where each says it means to."""

from __future__ import annotations

from datetime import timedelta

import pytest

from iterion.budget import DurationError
from iterion.budget import parse_duration as budget_duration
from iterion.dsl.values import parse_duration as dsl_duration
from iterion.store.gc import GcError
from iterion.store.gc import parse_duration as gc_age


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("1h30m", 5400), ("1.5h", 5400), (".5h", 1800),
                                               ("1.h", 3600), ("250ms", 0.25), ("500us", 5e-4), ("2d", 172800),
                                               ("1w", 604800), ("1d12h", 129600), (" 30m ", 1800)])
def test_the_three_callers_read_every_form_with_units_alike(text: str, seconds: float) -> None:
    assert budget_duration(text) == pytest.approx(seconds)
    assert dsl_duration(text) == pytest.approx(seconds)
    assert gc_age(text).total_seconds() == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["soon", "-5m", "1h 30m", "10x", "m", "1e3h", "5M5", "inf", "nan"])
def test_the_three_callers_refuse_the_same_garbage(bad: str) -> None:
    with pytest.raises(DurationError):
        budget_duration(bad)
    assert dsl_duration(bad) is None
    with pytest.raises(GcError) as info:
        gc_age(bad)
    assert info.value.message == f"--older-than {bad!r} is not a duration"
    assert info.value.hint == "give a number with s, m, h, d or w, e.g. --older-than 7d"


def test_a_bare_number_is_seconds_only_for_a_run_cap() -> None:
    assert budget_duration("45") == 45 and budget_duration(12) == 12
    assert dsl_duration("45") is None  # the language writes seconds as a number literal
    with pytest.raises(GcError):  # an age that decides deletions: 7 days or 7 seconds? not guessed
        gc_age("7")


def test_gc_keeps_its_tolerance_for_case_and_a_space_before_the_unit() -> None:
    assert gc_age("7 D") == gc_age("7d") == timedelta(days=7)
    assert gc_age("2W") == timedelta(weeks=2)
    with pytest.raises(DurationError):
        budget_duration("7 d")
