"""A real nats-server, a bare repository as the forge, and `iterion runner` processes claiming from it."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git, start_cli
from tests.natsserver import NatsServer

# three nodes; each appends one line to a counter file outside the workspace (how many times it
# executed) and writes one file into the workspace. b sleeps on its first execution only.
THREE = """\
## Three tool nodes: side-effect counters outside the workspace, one file each inside it.
vars:
  count_dir: string = "/tmp"
  pause_s: string = "0"

tool a:
  command: "echo x >> {{vars.count_dir}}/a.count; echo A > a.txt"

tool b:
  command: "echo x >> {{vars.count_dir}}/b.count; if [ $(wc -l < {{vars.count_dir}}/b.count) -eq 1 ]; then sleep {{vars.pause_s}}; fi; echo B > b.txt"

tool c:
  command: "echo x >> {{vars.count_dir}}/c.count; echo C > c.txt"

workflow three:
  entry: a
  a -> b
  b -> c
  c -> done
"""

# dispositions: pick the outcome with a var
OUTCOMES = """\
## One tool node whose exit decides the disposition; fail nodes for the deliberate refusals.
vars:
  mode: string = "ok"
  count_dir: string = "/tmp"

schema verdict:
  go: bool

fail refused:
  code: LOT_NOT_ACTIONABLE
  message: "nothing to do"

fail over_budget:
  code: PHASE_BUDGET_EXCEEDED
  message: "raise the cap and resume"
  resumable: true

compute broken:
  output: verdict
  expr:
    go: "vars.mode / 2 > 1"

tool work:
  command: "echo x >> {{vars.count_dir}}/work.count; case {{vars.mode}} in transient) exit 75;; *) echo done;; esac"

compute route:
  output: verdict
  expr:
    go: "vars.mode == 'ok' || vars.mode == 'transient'"

workflow outcomes:
  entry: route
  route -> work when go
  route -> refused when "vars.mode == 'deliberate'"
  route -> over_budget when "vars.mode == 'bot_code'"
  route -> broken when "vars.mode == 'deterministic'"
  route -> done
  work -> done
  broken -> done
"""


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


def make_forge(root: Path, files: dict[str, str]) -> Path:
    seed = root / "seed"
    seed.mkdir(parents=True)
    git(seed, "init", "-q", "-b", "main")
    for name, text in files.items():
        (seed / name).parent.mkdir(parents=True, exist_ok=True)
        (seed / name).write_text(text)
    git(seed, "add", ".")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "workflows")
    forge = root / "forge.git"
    git(root, "clone", "-q", "--bare", str(seed), str(forge))
    return forge


@pytest.fixture
def forge(tmp_path: Path) -> Path:
    return make_forge(tmp_path / "forge", {"three.bot": THREE, "outcomes.bot": OUTCOMES})


def runner_env(**extra: str) -> dict[str, str | None]:
    """For start_cli/run_cli: no ambient store, the table's delays scaled down, ``extra`` on top."""
    return {"ITERION_STORE_DIR": None, "ITERION_QUEUE_DELAY_SCALE": "0.01", "ITERION_RETRY_BACKOFF_S": "0",
            **extra}


@dataclass
class RunnerProc:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "claiming from" in self.text():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"runner {self.name} exited: {self.text()}")
            time.sleep(0.1)
        raise AssertionError(f"runner {self.name} never started: {self.text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return int(self.proc.returncode)


@dataclass
class Cluster:
    """One queue namespace (a prefix) on the test's nats-server, and the runners started on it."""

    nats: NatsServer
    root: Path
    prefix: str = field(default_factory=lambda: "q" + uuid.uuid4().hex[:10])
    runners: list[RunnerProc] = field(default_factory=list)
    opened: list[Any] = field(default_factory=list)

    def runner(self, name: str, *args: str, env: dict[str, str] | None = None,
               ack_wait: float = 2.0, lease_ttl: float = 2.0, max_deliver: int = 3) -> RunnerProc:
        work = self.root / f"work-{name}"
        log = self.root / f"runner-{name}.log"
        with open(log, "wb") as err:
            proc = start_cli("runner", "--nats", self.nats.url, "--prefix", self.prefix, "--work-dir", str(work),
                             "--name", name, "--ack-wait", str(ack_wait), "--lease-ttl", str(lease_ttl),
                             "--max-deliver", str(max_deliver), "--grace", "5", *args,
                             cwd=self.root, env=runner_env(**(env or {})), stdout=subprocess.DEVNULL,
                             stderr=err, text=False)
        r = RunnerProc(name, proc, log)
        self.runners.append(r)
        return r

    def store(self) -> Any:
        """A client's view of the shared store (its own local root)."""
        from iterion.store import Store
        from iterion.store.jetstream import JetStreamStore

        docs = JetStreamStore(self.nats.url, prefix=self.prefix, timeout_s=10)
        self.opened.append(docs)
        return Store(self.root / f"client-{len(self.opened)}", docs=docs)

    def queue(self, **settings: Any) -> Any:
        from iterion.queue.jsqueue import QueueSettings, WorkQueue

        q = WorkQueue(self.nats.url, QueueSettings(prefix=self.prefix, ack_wait_s=settings.get("ack_wait", 2.0),
                                                   max_deliver=settings.get("max_deliver", 3),
                                                   lease_ttl_s=settings.get("lease_ttl", 2.0)))
        self.opened.append(q)
        return q

    def close(self) -> None:
        for r in self.runners:
            r.stop(signal.SIGKILL)
        for o in self.opened:
            try:
                o.close()
            except Exception:  # noqa: BLE001 - teardown of a stopped server
                pass


@pytest.fixture
def cluster(nats_server: NatsServer, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(nats_server, tmp_path)
    yield c
    c.close()


def wait_for(predicate: Any, what: str, timeout: float = 90, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def counts(d: Path) -> dict[str, int]:
    return {p.stem: len(p.read_text().splitlines()) for p in sorted(d.glob("*.count"))}
