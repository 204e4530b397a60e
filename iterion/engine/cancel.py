"""Cancellation: one token per run, set from a signal handler, polled by everything that waits.

A signal handler may only do async-safe work, so ``cancel`` just sets an event and signals the
process groups registered by running tools (SIGKILL) and agent CLIs (SIGTERM: the waiting thread
escalates to SIGKILL after the CLI's grace); the threads that wait notice and unwind.

The token also carries the run's ledger of live process groups (``iterion.engine.children``):
every group registered here is recorded in the run document while it lives, so a takeover
after a crash can end what is left of it (docs/technical/processes.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from iterion.engine.errors import Cancelled

T = TypeVar("T")


class GroupLedger(Protocol):
    """Where a run records its live process groups (``iterion.engine.children.RunChildren``)."""

    def opened(self, pgid: int, what: str) -> object: ...

    def closed(self, key: object) -> None: ...


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._groups: dict[int, bool] = {}  # pgid -> graceful (SIGTERM first)
        self.reason: str = ""
        self.ledger: GroupLedger | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()
        with self._lock:
            groups = list(self._groups.items())
        for pgid, graceful in groups:
            if graceful:
                signal_group(pgid, signal.SIGTERM)
            else:
                kill_group(pgid)

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled(self.reason or "cancelled")

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)

    @contextmanager
    def process_group(self, pgid: int, *, what: str = "", graceful: bool = False) -> Iterator[None]:
        """Register a child's process group so a cancel kills it at once (``graceful``: SIGTERM
        it; the registering thread escalates), and record it in the run's ledger while it lives."""
        key = self._record(pgid, what)
        with self._lock:
            self._groups[pgid] = graceful
        try:
            if self._event.is_set():
                signal_group(pgid, signal.SIGTERM) if graceful else kill_group(pgid)
            yield
        finally:
            with self._lock:
                self._groups.pop(pgid, None)
            if key is not None and self.ledger is not None:
                with contextlib.suppress(Exception):  # best effort: a stale record is verified before use
                    self.ledger.closed(key)

    def _record(self, pgid: int, what: str) -> object:
        if self.ledger is None:
            return None
        try:
            return self.ledger.opened(pgid, what)
        except Exception:  # noqa: BLE001 - the launcher's tie still ends the group if iterion dies
            return None


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(pgid: int) -> None:
    signal_group(pgid, signal.SIGKILL)


_ABANDON_SETTLE_S = 5.0


def call_cancellable(fn: Callable[[], T], token: CancelToken, poll: float = 0.05,
                     check: Callable[[], None] | None = None,
                     on_abandon: Callable[[], None] | None = None) -> T:
    """Run ``fn`` in a daemon thread and return its result, or raise Cancelled as soon as the
    token is set (the abandoned call's result is discarded: a backend request cannot be
    interrupted mid-flight, but the run must stop at once). ``on_abandon`` runs in this thread
    before the cancel (or ``check``'s exception) propagates: it ends what the call started (an
    agent CLI's process group), so nothing of the node still runs when the run records its stop."""
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
        try:
            token.check()
            if check is not None:
                check()  # e.g. the run's duration cap: the abandoned call's result is discarded
        except BaseException:
            if on_abandon is not None:
                on_abandon()
                # what it ended was the call's own: let the call unwind (its ledger record closed)
                # before the stop is recorded, bounded in case the backend ignores its processes
                done.wait(_ABANDON_SETTLE_S)
            raise
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
