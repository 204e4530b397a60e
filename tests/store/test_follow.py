"""The one follow loop (``iterion.store.follow``) on a real store: it ends only once the run is not
``running`` and its lock is free, twice in a row, after reading every event the run wrote."""

from __future__ import annotations

from collections.abc import Callable

from iterion.store import RunDoc, RunStatus, Store
from iterion.store.follow import PARKED_ROUNDS, Follower, follow


def _follower(store: Store, run_id: str, after: int = 0) -> Follower[object]:
    return Follower(lambda seq: (store.read_events(run_id, after_seq=seq), False),
                    lambda: store.load_run(run_id).status.value, lambda: store.is_locked(run_id),
                    lambda e: e.seq, last=after)  # type: ignore[attr-defined]


def _scripted(steps: list[Callable[[], object]]) -> Callable[[float], None]:
    """A sleep that makes the run move on between two rounds (one step per round)."""
    def sleep(_: float) -> None:
        if steps:
            steps.pop(0)()
    return sleep


def test_the_follow_reads_every_event_and_ends_once_the_process_let_go(store: Store, run: RunDoc) -> None:
    store.update_run(run.id, lambda d: d.set_status(RunStatus.RUNNING))
    store.append_event(run.id, "run_started")
    lock = store.lock(run.id)
    assert lock.try_acquire()
    rounds: list[list[str]] = []

    def park() -> None:  # the status moves, then the process writes its closing event, still locked
        store.update_run(run.id, lambda d: d.set_status(RunStatus.PAUSED_OPERATOR))
        store.append_event(run.id, "run_paused")

    def let_go() -> None:
        store.append_event(run.id, "closing")
        lock.release()

    follower = _follower(store, run.id)
    steps: list[Callable[[], object]] = [lambda: store.append_event(run.id, "node_started"), park, lambda: None, lambda: None, let_go]
    for batch in follow(follower, sleep=_scripted(steps)):
        rounds.append([e.type for e in batch])  # type: ignore[attr-defined]
    assert follower.ended == "paused_operator"
    assert [t for r in rounds for t in r] == ["run_started", "node_started", "run_paused", "closing"]
    assert not steps  # it waited while the lock was held, though the status had moved
    assert rounds[-PARKED_ROUNDS:] == [["closing"], []]  # one more read after the lock was free


def test_a_parked_run_ends_the_follow_after_its_events(store: Store, run: RunDoc) -> None:
    store.append_event(run.id, "run_started")
    store.append_event(run.id, "run_paused")
    slept: list[float] = []
    follower = _follower(store, run.id, after=1)
    batches = [[e.seq for e in b] for b in follow(follower, poll_s=0.5, sleep=slept.append)]  # type: ignore[attr-defined]
    assert batches == [[2], []] and slept == [0.5]
    assert (follower.ended, follower.last) == (run.status.value, 2)


def test_a_running_run_nobody_holds_is_followed_on(store: Store, run: RunDoc) -> None:
    store.update_run(run.id, lambda d: d.set_status(RunStatus.RUNNING))
    follower = _follower(store, run.id)
    rounds = 0
    for _ in follow(follower, sleep=lambda _: None):
        rounds += 1
        if rounds == 20:  # the caller decides when to give up (the CLI notes a stall)
            break
    assert follower.ended is None and rounds == 20
