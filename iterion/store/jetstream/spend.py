"""The daily spend counter on JetStream: KV ``<prefix>_spend``, key = the UTC day (YYYY-MM-DD).

Every machine sharing the store charges the same entry. An add is a compare-and-swap: read the
entry and its revision, write the sum with that revision as the expected last one; a writer that
slipped in between makes the server refuse (wrong last sequence) and the add re-reads and tries
again. The first charge of a day creates the key (exactly one creator wins; the loser re-reads).
A call that got no answer (server restarting) is retried inside the same add: the charge id kept
in the document (``SpendDay.recent``) tells whether the unanswered write landed, so it is never
counted twice. See iterion/store/spend.py for the document.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from iterion.store.errors import StoreUnavailableError
from iterion.store.jetstream.bridge import TRANSIENT, Bridge
from iterion.store.jetstream.kvcreate import kv_create
from iterion.store.spend import SpendDay, unreadable, utc_day

if TYPE_CHECKING:  # the store hands out its counter (JetStreamStore.spend_counter): no import back
    pass

CAS_ATTEMPTS = 200  # lost races in a row before giving up (each loser re-reads: progress is global)
TRANSIENT_WAIT_S = 0.2


class JetStreamSpendCounter:
    def __init__(self, bridge: Bridge, prefix: str) -> None:
        self.bridge = bridge
        self.bucket = f"{prefix}_spend"
        self._kv: Any = None

    async def _bucket(self) -> Any:
        if self._kv is None:
            from nats.js.api import KeyValueConfig, StorageType

            # idempotent for an identical config: every process opening the counter asks for it
            self._kv = await self.bridge.js.create_key_value(
                KeyValueConfig(bucket=self.bucket, history=1, storage=StorageType.FILE))
        return self._kv

    async def _read(self, kv: Any, day: str) -> tuple[SpendDay, int | None]:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await kv.get(day)
        except KeyNotFoundError:  # KeyDeletedError derives from it
            return SpendDay(day=day), None
        try:
            return SpendDay.model_validate_json(entry.value), int(entry.revision)
        except ValueError as exc:
            raise unreadable(f"{self.bridge.url} bucket {self.bucket} key {day}", exc) from None

    async def _add(self, cost_usd: float, charge_id: str, day: str) -> SpendDay:
        from nats.js.errors import KeyWrongLastSequenceError

        deadline = time.monotonic() + self.bridge.timeout_s
        attempts = 0
        while True:
            try:
                kv = await self._bucket()
                current, revision = await self._read(kv, day)
                after = current.with_charge(cost_usd, charge_id)
                if after is current:  # an earlier, unanswered write of this charge landed
                    return current
                data = after.model_dump_json().encode()
                if revision is None:
                    if await kv_create(kv, day, data) is not None:
                        return after
                else:
                    try:
                        await kv.update(day, data, last=revision)
                        return after
                    except KeyWrongLastSequenceError:
                        pass
                attempts += 1
                if attempts >= CAS_ATTEMPTS:
                    raise StoreUnavailableError(f"the daily spend counter in {self.bucket} kept changing under "
                                                f"{CAS_ATTEMPTS} attempts to charge it",
                                                hint="retry; many runs are charging at once")
            except TRANSIENT():
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(TRANSIENT_WAIT_S)

    def add(self, cost_usd: float, *, charge_id: str, now: datetime | None = None) -> SpendDay:
        if cost_usd < 0:
            raise ValueError("a charge cannot be negative")
        return self.bridge.call(self._add(cost_usd, charge_id, utc_day(now)))

    def today(self, now: datetime | None = None) -> SpendDay:
        async def go() -> SpendDay:
            return (await self._read(await self._bucket(), utc_day(now)))[0]

        return self.bridge.call(go())
