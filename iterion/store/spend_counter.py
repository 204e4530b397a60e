"""Which daily spend counter a store uses (its own module: the JetStream counter builds on
iterion/store/spend.py, so the choice between the two cannot live there)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from iterion.store.spend import FileSpendCounter, SpendCounter

if TYPE_CHECKING:
    from iterion.store.store import Store


def spend_counter(store: Store) -> SpendCounter:
    """The counter of ``store``: in JetStream when its run documents are there (shared by every
    machine), else under the store directory."""
    if store.shared:
        # lazily: nats-py is imported only by a process that uses a shared store
        from iterion.store.jetstream.spend import JetStreamSpendCounter, jetstream_of

        return JetStreamSpendCounter.for_store(jetstream_of(store.docs))
    return FileSpendCounter(store.root)
