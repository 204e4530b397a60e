"""One conformance suite, two backends: the filesystem store and the JetStream store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from iterion.store.docstore import RunDocumentStore
from tests.natsserver import NatsServer


class Backends:
    """Opens stores of one backend; each test gets its own namespace (a store dir / a prefix)."""

    def __init__(self, kind: str, tmp_path: Path, nats: NatsServer | None) -> None:
        self.kind, self.tmp_path, self.nats = kind, tmp_path, nats
        self.prefix = "t" + uuid.uuid4().hex[:10]
        self.opened: list[object] = []

    def open(self) -> RunDocumentStore:
        if self.kind == "fs":
            from iterion.store.store import Store
            store: RunDocumentStore = Store(self.tmp_path / "store")
        else:
            from iterion.store.jetstream import JetStreamStore
            assert self.nats is not None
            store = JetStreamStore(self.nats.url, prefix=self.prefix, timeout_s=5)
        self.opened.append(store)
        return store

    def close(self) -> None:
        for s in self.opened:
            close = getattr(s, "close", None)
            if close:
                close()


@pytest.fixture(params=["fs", "jetstream"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backends]:
    nats = request.getfixturevalue("nats_server") if request.param == "jetstream" else None
    b = Backends(request.param, tmp_path, nats)
    yield b
    b.close()
