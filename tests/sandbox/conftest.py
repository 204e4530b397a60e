"""Fixtures of the sandbox tests: bubblewrap (required: .ci/run installs it), a file the test owns
outside /tmp (the sandbox's /tmp is private, so a file under pytest's tmp_path is out of reach
anyway), a listening socket on 127.0.0.1, and the claw fixtures (scripted LLM server)."""

from __future__ import annotations

import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from iterion.store import Store

from ..claw.conftest import llm  # noqa: F401 (the scripted LLM server, shared)


@pytest.fixture(autouse=True)
def bwrap() -> str:
    exe = shutil.which("bwrap")
    assert exe, "the sandbox tests need bubblewrap: apt-get install bubblewrap (.ci/run installs it)"
    return exe


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def outside() -> Iterator[Path]:
    """A file this test owns outside the workspace and outside /tmp (under ~/.cache), removed after."""
    base = Path.home() / ".cache" / "iterion-sandbox-tests" / uuid.uuid4().hex
    base.mkdir(parents=True)
    f = base / "owned.txt"
    f.write_bytes(b"the test's own bytes\n")
    try:
        yield f
    finally:
        shutil.rmtree(base, ignore_errors=True)


class Listener:
    """A socket listening on 127.0.0.1 (random port) counting the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"hello\n")
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    lst = Listener()
    try:
        yield lst
    finally:
        lst.close()


PROBE = Path(__file__).with_name("probe.py")


def connect_command(port: int) -> str:
    """A shell command printing ``connected`` or ``refused ...`` for 127.0.0.1:PORT (never failing)."""
    return f"python3 {PROBE} connect {port}"
