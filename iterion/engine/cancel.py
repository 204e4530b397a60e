"""Cancellation: one token per run, set from a signal handler, polled by everything that waits.

A signal handler may only do async-safe work, so ``cancel`` just sets an event and kills the
process groups registered by running tools; the threads that wait notice and unwind.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from iterion.engine.errors import Cancelled

T = TypeVar("T")


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self.reason: str = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()
        with self._lock:
            groups = list(self._groups)
        for pgid in groups:
            kill_group(pgid)

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled(self.reason or "cancelled")

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    @contextmanager
    def process_group(self, pgid: int) -> Iterator[None]:
        """Register a child's process group so a cancel kills it at once."""
        with self._lock:
            self._groups.add(pgid)
        try:
            if self._event.is_set():
                kill_group(pgid)
            yield
        finally:
            with self._lock:
                self._groups.discard(pgid)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def call_cancellable(fn: Callable[[], T], token: CancelToken, poll: float = 0.05,
                     check: Callable[[], None] | None = None) -> T:
    """Run ``fn`` in a daemon thread and return its result, or raise Cancelled as soon as the
    token is set (the abandoned call's result is discarded: a backend request cannot be
    interrupted mid-flight, but the run must stop at once)."""
    token.check()
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="iterion-call").start()
    while not done.wait(poll):
        token.check()
        if check is not None:
            check()  # e.g. the run's duration cap: the abandoned call's result is discarded
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextmanager
def signals_cancel(token: CancelToken) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM cancel ``token`` (main thread only; a no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        if token.cancelled and signum == signal.SIGINT:
            # a second Ctrl-C: the operator will not wait for the cancel to be persisted
            raise KeyboardInterrupt
        token.cancel(f"cancelled by {signal.Signals(signum).name}")

    old_int = signal.signal(signal.SIGINT, handler)
    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
