"""A real `iterion server` process on 127.0.0.1 (random port) over a fresh project holding the demo."""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import FIXTURES, make_checkout, start_cli

TOKEN = "test-token-0123456789abcdef"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Server:
    url: str
    token: str
    project: Path
    proc: subprocess.Popen[str]
    stderr_path: Path

    def client(self, token: str | None = None) -> httpx.Client:
        tok = self.token if token is None else token
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    @property
    def store(self) -> Path:
        return self.project / ".git" / "iterion" / "store"

    def run_json(self, run_id: str) -> dict[str, Any]:
        return json.loads((self.store / "runs" / run_id / "run.json").read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def demo_project(root: Path) -> Path:
    project = make_checkout(root)
    shutil.copytree(FIXTURES / "demo", project / "demo")
    return project


def start_server(project: Path, *args: str, env: dict[str, str] | None = None, token: str | None = TOKEN,
                 timeout: float = 60) -> Server:
    overlay: dict[str, str | None] = {"ITERION_SERVER_TOKEN": token, "ITERION_STORE_DIR": None, **(env or {})}
    err = project.parent / f"server-{time.monotonic_ns()}.err"
    with open(err, "w") as stderr:
        proc = start_cli("server", "--port", "0", *args, cwd=project, env=overlay, stderr=stderr)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    if not line.startswith("open http://"):
        proc.kill()
        raise AssertionError(f"server did not start: {line!r} {err.read_text()}")
    url, _, tok = line.strip()[len("open "):].partition("/?token=")
    server = Server(url, tok, project, proc, err)
    for _ in range(100):  # the socket is bound before the line is printed; wait for the app
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise AssertionError("server never answered /healthz")


def wait_status(client: httpx.Client, run_id: str, wanted: set[str], timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = client.get(f"/api/runs/{run_id}").json()
        if body["run"]["status"] in wanted and not body["executing"]:
            return body  # parked AND its process let go of the lock
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} never reached {wanted}: {body.get('run', {}).get('status')}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = start_server(demo_project(tmp_path / "project"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's chromium driven by playwright over CDP (one per test module)."""
    assert CHROMIUM, "chromium is not installed (.ci/run installs Debian's chromium package)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()
