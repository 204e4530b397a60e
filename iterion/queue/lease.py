"""The per-run lease: at most one runner, on any machine, executes a run at a time.

A lease is the run's entry in the KV bucket ``<prefix>_leases`` (the bucket's max age is the
lease's TTL). Acquire is a KV ``create`` (refused while the key exists); the holder renews it
with a revision-checked ``update`` every ``ttl / 3``; release deletes it with the revision it
holds. Invariants:
- two runners never both hold a run's lease: ``create`` and the revision-checked ``update`` are
  decided by the server, and an entry only disappears ``ttl`` after its last renewal;
- a renewal refused by the server (another runner created the key after ours expired) means the
  lease is LOST: the holder must stop executing at the next node boundary and write nothing
  more to the run (``Lease.lost`` is set and ``on_lost`` is called once);
- a renewal that cannot reach the server is retried; the lease counts as lost once ``ttl`` has
  passed since the last renewal that succeeded (by then another runner may hold it).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iterion.store.jetstream.bridge import StoreUnavailableError
from iterion.store.jetstream.store import run_token
from iterion.store.timeutil import utcnow

if TYPE_CHECKING:
    from iterion.queue.jsqueue import WorkQueue

log = logging.getLogger("iterion.queue")


class LeaseHeld(Exception):
    def __init__(self, run_id: str, holder: dict[str, Any] | None) -> None:
        who = f"{holder.get('runner')} on {holder.get('host')}" if holder else "another runner"
        super().__init__(f"run {run_id} is leased by {who}")
        self.holder = holder


def holder(queue: WorkQueue, run_id: str) -> dict[str, Any] | None:
    """Who holds ``run_id``'s lease now (None: nobody)."""
    async def go() -> dict[str, Any] | None:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await queue.leases.get(run_token(run_id))
        except KeyNotFoundError:
            return None
        try:
            data = json.loads(entry.value or b"{}")
        except ValueError:
            return {"runner": "?"}
        return data if isinstance(data, dict) else {"runner": "?"}

    return queue.bridge.call(go())


class Lease:
    def __init__(self, queue: WorkQueue, run_id: str, runner: str, *, ttl_s: float | None = None,
                 on_lost: Callable[[str], None] | None = None) -> None:
        self.queue, self.run_id, self.runner = queue, run_id, runner
        self.ttl_s = ttl_s if ttl_s is not None else queue.lease_ttl_s
        self.key = run_token(run_id)
        self.revision = 0
        self.lost = threading.Event()
        self.lost_reason = ""
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_ok = 0.0

    def _value(self) -> bytes:
        return json.dumps({"runner": self.runner, "host": socket.gethostname(), "pid": os.getpid(),
                           "run_id": self.run_id, "renewed_at": utcnow().isoformat()}).encode()

    def acquire(self) -> None:
        """Take the lease or raise LeaseHeld; then renew it in the background until ``release``."""
        async def go() -> int | None:
            from iterion.store.jetstream.kvcreate import kv_create

            return await kv_create(self.queue.leases, self.key, self._value())

        rev = self.queue.bridge.call(go())
        if not rev:
            raise LeaseHeld(self.run_id, holder(self.queue, self.run_id))
        self.revision = rev
        self._last_ok = time.monotonic()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{self.run_id}", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        period = max(self.ttl_s / 3.0, 0.05)
        while not self._stop.wait(period):
            try:
                self.renew()
            except StoreUnavailableError as exc:
                if time.monotonic() - self._last_ok >= self.ttl_s:
                    self._mark_lost(f"the lease could not be renewed for {self.ttl_s:g}s ({exc.message})")
                    return
            if self.lost.is_set():
                return

    def renew(self) -> None:
        async def go() -> int:
            from nats.js.errors import KeyWrongLastSequenceError

            try:
                return int(await self.queue.leases.update(self.key, self._value(), last=self.revision))
            except KeyWrongLastSequenceError:
                return 0

        rev = self.queue.bridge.call(go())
        if not rev:
            self._mark_lost("another runner holds the lease now (ours expired)")
            return
        self.revision = rev
        self._last_ok = time.monotonic()

    def _mark_lost(self, reason: str) -> None:
        if self.lost.is_set():
            return
        self.lost_reason = reason
        self.lost.set()
        log.warning("run %s: lease lost: %s", self.run_id, reason)
        if self._on_lost is not None:
            self._on_lost(reason)

    def release(self) -> None:
        """Stop renewing and delete the lease (only the entry we wrote: a revision-checked delete)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self.lost.is_set() or not self.revision:
            return

        async def go() -> None:
            import contextlib

            from nats.js.errors import KeyWrongLastSequenceError

            with contextlib.suppress(KeyWrongLastSequenceError):
                await self.queue.leases.delete(self.key, last=self.revision)

        try:
            self.queue.bridge.call(go())
        except StoreUnavailableError:  # it expires on its own after the TTL
            log.warning("run %s: lease not released (server unavailable); it expires in %gs", self.run_id,
                        self.ttl_s)
