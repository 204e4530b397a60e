"""Budget: caps per axis, shared thread-safe consumption, merge_ask, restore, durations."""

from __future__ import annotations

import threading

import pytest

from iterion import ir
from iterion.budget import (
    Budget,
    BudgetAsk,
    BudgetExceeded,
    DurationError,
    Usage,
    format_duration,
    merge_ask,
    parse_duration,
    raised_axes,
)
from iterion.failure_codes import FailureCode


class FakeClock:
    """A settable clock: active-time tests must not depend on wall-clock speed."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("text,seconds", [("30m", 1800), ("4h", 14400), ("90s", 90), ("1h30m", 5400),
                                          ("1.5h", 5400), ("250ms", 0.25), ("45", 45), (12, 12), ("2d", 172800)])
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "abc", "10x", "1h 30m", "-5m", "m"])
def test_parse_duration_refuses(bad: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(bad)


def test_format_duration() -> None:
    assert format_duration(5400) == "1h30m"
    assert format_duration(90) == "1m30s"
    assert format_duration(0) == "0s"


def test_tokens_cap_names_axis_cap_and_consumption() -> None:
    b = Budget(BudgetAsk(max_tokens=100))
    b.charge(tokens=60)
    b.charge(tokens=40)  # exactly at the cap is allowed
    with pytest.raises(BudgetExceeded) as info:
        b.charge(tokens=1)
    exc = info.value
    assert (exc.axis, exc.cap, exc.consumed) == ("max_tokens", 100, 101)
    assert exc.code is FailureCode.BUDGET_EXCEEDED
    assert "max_tokens cap 100 reached (consumed 101)" in str(exc)
    assert b.usage().tokens == 101  # what was spent stays charged


def test_cost_cap() -> None:
    b = Budget(BudgetAsk(max_cost_usd=1.0))
    b.charge(cost_usd=0.75)
    with pytest.raises(BudgetExceeded, match=r"max_cost_usd cap \$1 reached \(consumed \$1\.5\)") as info:
        b.charge(cost_usd=0.75)
    assert info.value.axis == "max_cost_usd"
    assert b.usage().cumulative_cost_usd == pytest.approx(1.5)


def test_iterations_cap() -> None:
    b = Budget(BudgetAsk(max_iterations=2))
    b.add_iteration()
    b.add_iteration()
    with pytest.raises(BudgetExceeded) as info:
        b.add_iteration()
    assert info.value.axis == "max_iterations" and info.value.consumed == 3


def test_duration_counts_active_time_only_and_parallel_branches_once() -> None:
    clock = FakeClock()
    b = Budget(BudgetAsk(max_duration_s=60), clock=clock)
    with b.active():
        with b.active():  # a second branch in parallel: the same wall time, counted once
            clock.now += 30
    clock.now += 1000  # paused: not active time
    assert b.usage().active_duration_s == pytest.approx(30)
    b.check()
    assert b.remaining_duration() == pytest.approx(30)
    with b.active():
        clock.now += 31
        with pytest.raises(BudgetExceeded) as info:
            b.check()
    assert info.value.axis == "max_duration"
    assert "max_duration cap 1m reached (consumed 1m1s)" in str(info.value)


def test_no_caps_never_raises() -> None:
    b = Budget()
    b.charge(tokens=10**9, cost_usd=10**6)
    b.add_iteration(10**6)
    b.check()


def test_consumption_is_thread_safe() -> None:
    b = Budget(BudgetAsk(max_tokens=10**9))

    def work() -> None:
        for _ in range(2000):
            b.charge(tokens=1, cost_usd=0.001)
            b.add_iteration()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    u = b.usage()
    assert u.tokens == 16000 and u.iterations == 16000
    assert u.cost_usd == pytest.approx(16.0)


def test_exactly_one_thread_crosses_a_shared_cap() -> None:
    b = Budget(BudgetAsk(max_tokens=1000))
    raised: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(200):
            try:
                b.charge(tokens=1)
            except BudgetExceeded as exc:
                with lock:
                    raised.append(int(exc.consumed))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 1600 charges against a cap of 1000: every charge past the cap raises, each seeing its own total
    assert sorted(raised) == list(range(1001, 1601))


def test_parallel_branch_slots() -> None:
    b = Budget(BudgetAsk(max_parallel_branches=2))
    active, peak = 0, 0
    lock = threading.Lock()
    gate = threading.Barrier(2, timeout=30)

    def branch() -> None:
        nonlocal active, peak
        with b.branch_slot():
            with lock:
                active += 1
                peak = max(peak, active)
            try:
                gate.wait()  # the first two meet here; later ones wait for a slot, then pair up
            except threading.BrokenBarrierError:
                pass
            with lock:
                active -= 1

    threads = [threading.Thread(target=branch) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2
    with b.branch_slot(), b.branch_slot():
        with pytest.raises(BudgetExceeded) as info:
            with b.branch_slot(block=False):
                pass
    assert info.value.axis == "max_parallel_branches"


def test_merge_ask_non_zero_override_wins_zero_inherits() -> None:
    launch = BudgetAsk(max_cost_usd=10, max_tokens=5000, max_duration="2h30m")
    merged = merge_ask(launch, BudgetAsk(max_duration="4h"))
    assert merged.max_duration_s == 14400
    assert merged.max_cost_usd == 10 and merged.max_tokens == 5000
    merged = merge_ask(launch, BudgetAsk(max_cost_usd=120))
    assert merged.max_cost_usd == 120 and merged.max_duration_s == 9000
    assert merge_ask(launch, None) == launch
    assert raised_axes(launch, merged) == {"max_cost_usd"}


def test_ask_from_wire_and_ir() -> None:
    ask = BudgetAsk.model_validate({"max_duration": "4h", "max_cost_usd": None})
    assert ask.max_duration_s == 14400 and ask.max_cost_usd == 0
    assert BudgetAsk.from_ir(ir.Budget(max_cost_usd=2, max_iterations=5)) == BudgetAsk(max_cost_usd=2, max_iterations=5)
    with pytest.raises(ValueError):
        BudgetAsk(max_tokens=-1)


def test_restore_from_checkpoint_keeps_the_clock_charged() -> None:
    clock = FakeClock()
    b = Budget(BudgetAsk(max_duration_s=100, max_cost_usd=5), clock=clock)
    b.restore(Usage(tokens=7, cost_usd=4.9, iterations=3, active_duration_s=99, cumulative_cost_usd=4.9))
    assert b.usage().tokens == 7
    with b.active():
        clock.now += 2
        with pytest.raises(BudgetExceeded, match="max_duration"):
            b.check()
    # a raised cap on resume lets it continue with the consumption still charged
    b.set_ask(merge_ask(b.ask, BudgetAsk(max_duration="10m")))
    b.check()
    assert b.usage().active_duration_s == pytest.approx(101)
    with pytest.raises(BudgetExceeded, match="max_cost_usd"):
        b.charge(cost_usd=0.2)
