"""Follow a run's timeline until the run parks: the one loop ``iterion inspect --follow`` and the
HTTP API's event stream (``GET /api/runs/{id}/events?follow=1``, which ``iterion remote`` and the
web page read) both use, with one timing.

Each round reads the run's status and whether a process on this machine holds its lock FIRST,
then the events after the last one seen: an event written before the status moved is therefore
read in the same round or an earlier one. The follow ends on the second consecutive round in
which the run is not ``running`` and its lock is free: the process that executed it let go,
so every event it wrote was read (the second round is one more read after that, for a process on
another machine, whose lock this one cannot see). A run marked ``running`` that nobody executes
is followed on: the caller decides how long to wait (the CLI notes a stall, the page waits).

Sans-I/O in the middle: ``Follower.step`` does one round of reads (blocking calls, the caller's
callbacks) and never sleeps; ``follow`` drives it with ``time.sleep``, the HTTP server with
``asyncio.sleep`` between rounds it runs in a thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

POLL_S = 0.2  # between two rounds that found nothing more to read
PARKED_ROUNDS = 2  # consecutive rounds not running with the lock free before the follow ends

E = TypeVar("E")


@dataclass
class Follower(Generic[E]):
    """One follow of one run. ``read_after(seq)``: the next events after ``seq`` and whether
    more are ready at once (a page); ``status()``: the run's status; ``locked()``: whether a
    process on this machine holds the run's lock; ``seq_of``: an event's sequence number."""

    read_after: Callable[[int], tuple[Sequence[E], bool]]
    status: Callable[[], str]
    locked: Callable[[], bool]
    seq_of: Callable[[E], int]
    last: int = 0                # the last sequence number read
    ended: str | None = None     # the status the run parked in, once the follow ended
    _parked_rounds: int = field(default=0, repr=False)

    def step(self) -> tuple[Sequence[E], bool]:
        """One round: the new events, and whether more are ready now (read again at once)."""
        status = self.status()  # before the events (see the module doc)
        locked = self.locked()
        events, more = self.read_after(self.last)
        if events:
            self.last = self.seq_of(events[-1])
        if more:
            return events, True
        if status != "running" and not locked:
            self._parked_rounds += 1
            if self._parked_rounds >= PARKED_ROUNDS:
                self.ended = status
        else:
            self._parked_rounds = 0
        return events, False


def follow(follower: Follower[E], *, poll_s: float = POLL_S,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[Sequence[E]]:
    """Each round's new events (an empty batch too, so a caller can check its own conditions
    while the run is quiet) until the run parks: ``follower.ended`` is then its status. A caller
    that stops iterating earlier stops the follow (nothing is left running)."""
    while follower.ended is None:
        events, more = follower.step()
        yield events
        if not more and follower.ended is None:
            sleep(poll_s)
