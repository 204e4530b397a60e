"""Which daily spend counter a store uses: the one its run documents keep beside them (a file
under the store directory, or JetStream's KV shared by every machine). A fenced store passes the
counter through: a charge records money already spent."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iterion.store.spend import SpendCounter
    from iterion.store.store import Store


def spend_counter(store: Store) -> SpendCounter:
    return store.docs.spend_counter()
