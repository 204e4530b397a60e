"""The run store on NATS JetStream (issue 16): see ``store.py`` for the layout and the CAS rule."""

from iterion.store.jetstream.bridge import StoreUnavailableError
from iterion.store.jetstream.store import JetStreamStore

__all__ = ["JetStreamStore", "StoreUnavailableError"]
