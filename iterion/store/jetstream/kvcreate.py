"""One rule for "create this key unless it already holds a value" on a NATS KV bucket.

nats-py's ``KeyValue.create`` is two steps: a create that fails on an existing key, then a read of
that key, so that a delete marker may be created over. A key that expires (a bucket's TTL: the
queue's leases, its request de-duplication) or is purged (a released name) between the two makes
that read raise KeyNotFoundError out of ``create``. The key is gone, which is exactly when the
create should be tried again; left to propagate, it crashed the runner thread that takes over a
dead runner's lease the moment that lease expired (its run was then never dead-lettered).
"""

from __future__ import annotations

from typing import Any

# the race is one round trip wide; a key that vanishes this many times in a row is left as held
ATTEMPTS = 5


async def kv_create(kv: Any, key: str, value: bytes) -> int | None:
    """The new entry's revision, or None when ``key`` holds a value."""
    from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

    for _ in range(ATTEMPTS):
        try:
            return int(await kv.create(key, value))
        except KeyWrongLastSequenceError:
            return None
        except KeyNotFoundError:
            continue  # gone between nats-py's create and its read of the key: create again
    return None
