"""One conformance suite, four ways: each backend raw, and each through the ``Store`` facade."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.natsserver import NatsServer

REPO = Path(__file__).resolve().parents[2]
KINDS = ["fs", "jetstream", "store-fs", "store-jetstream"]


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


class Backends:
    """Opens stores of one kind; each test gets its own namespace (a store dir / a prefix).

    ``store-jetstream`` gives every opened Store its own root, as separate machines would have:
    only JetStream is shared between them."""

    def __init__(self, kind: str, tmp_path: Path, nats: NatsServer | None) -> None:
        self.kind, self.tmp_path, self.nats = kind, tmp_path, nats
        self.prefix = "t" + uuid.uuid4().hex[:10]
        self.opened: list[Any] = []

    @property
    def jetstream(self) -> bool:
        return self.kind.endswith("jetstream")

    @property
    def facade(self) -> bool:
        return self.kind.startswith("store-")

    def spec(self) -> dict[str, Any]:
        """How a child process opens the same store (tests/storeconf/child.py)."""
        root = self.tmp_path / ("store" if not self.jetstream else f"machine-{len(self.opened) + 100}")
        return {"kind": self.kind, "root": str(root), "url": self.nats.url if self.nats else None,
                "prefix": self.prefix}

    def open(self) -> Any:
        from tests.storeconf.child import open_spec

        spec = self.spec()
        if self.jetstream:
            spec["root"] = str(self.tmp_path / f"machine-{len(self.opened)}")
        store = open_spec(spec)
        self.opened.append(store)
        return store

    def child(self, *args: str, timeout: float = 120) -> subprocess.Popen[str]:
        """``python -m tests.storeconf.child SPEC ARGS...`` (a second process on the same store)."""
        return subprocess.Popen([sys.executable, "-m", "tests.storeconf.child", json.dumps(self.spec()), *args],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def close(self) -> None:
        for s in self.opened:
            s.close()


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backends]:
    nats = request.getfixturevalue("nats_server") if request.param.endswith("jetstream") else None
    b = Backends(request.param, tmp_path, nats)
    yield b
    b.close()


@pytest.fixture(params=["store-fs", "store-jetstream"])
def facade(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backends]:
    """The Store facade only (artifacts, attachments, staleness: what only Store offers)."""
    nats = request.getfixturevalue("nats_server") if request.param.endswith("jetstream") else None
    b = Backends(request.param, tmp_path, nats)
    yield b
    b.close()
