"""``kv_create`` on a real NATS KV bucket: a key that expires between nats-py's create and its
read of the key is created again instead of raising KeyNotFoundError out of ``create``, which
crashed the runner thread taking over a dead runner's lease the moment that lease expired (its
run was then never dead-lettered: tests/queue/test_runners.py's dead-letter case, seen failing
under load). Measured with plain ``create`` on a 0.1 s TTL bucket: 6 such errors in 3 s."""

from __future__ import annotations

import time
import uuid

from iterion.store.jetstream.bridge import Bridge
from iterion.store.jetstream.kvcreate import kv_create
from tests.natsserver import NatsServer


def test_a_key_expiring_meanwhile_is_created_never_an_error(nats_server: NatsServer) -> None:
    bridge = Bridge(nats_server.url)
    try:
        async def bucket() -> object:
            from nats.js.api import KeyValueConfig

            return await bridge.js.create_key_value(KeyValueConfig(bucket=f"kvc{uuid.uuid4().hex[:8]}", history=1,
                                                                   ttl=0.1))

        kv = bridge.call(bucket())

        async def hammer(seconds: float) -> tuple[int, int]:
            """Creates back to back while the key keeps expiring: (created, held); nothing raised."""
            created = held = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if await kv_create(kv, "k", b"v") is None:
                    held += 1
                else:
                    created += 1
            return created, held

        created, held = bridge.call(hammer(2.0))
        assert created >= 2 and held > created  # it expired (and was created again) several times
        # and the plain cases: a free key is created, a held one is not
        assert bridge.call(kv_create(kv, "fresh", b"1")) is not None
        assert bridge.call(kv_create(kv, "fresh", b"2")) is None
    finally:
        bridge.close()
