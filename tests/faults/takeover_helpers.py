"""Shared pieces of the takeover fault tests: the CLI as a real subprocess (its own process group,
so a SIGKILL takes the whole run down like a crash would), and waiting for a marker file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from iterion.store import Event, Store

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120  # the only time limit: a generous bound on one subprocess


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out.pop("ITERION_STORE_DIR", None)
    out.pop("ITERION_STALE_AFTER_S", None)
    out["PATH"] = str(Path(sys.executable).parent) + os.pathsep + out.get("PATH", "")  # `iterion` as printed
    out.update(extra or {})
    return out


def cli(*args: str, cwd: Path, store: Path, extra_env: dict[str, str] | None = None,
        no_store: bool = False) -> subprocess.CompletedProcess[str]:
    """`iterion ARGS --store-dir STORE` (``no_store``: a command without that option, e.g. `track`)."""
    tail = [] if no_store else ["--store-dir", str(store)]
    return subprocess.run([sys.executable, "-m", "cli.main", *args, *tail], check=False, cwd=cwd,
                          env=env(extra_env), capture_output=True, text=True, timeout=TIMEOUT)


def cli_json(*args: str, cwd: Path, store: Path, extra_env: dict[str, str] | None = None,
             no_store: bool = False) -> dict[str, Any]:
    p = cli(*args, "--json", cwd=cwd, store=store, extra_env=extra_env, no_store=no_store)
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON from {args}: rc={p.returncode} out={p.stdout!r} err={p.stderr!r}") from None
    data["_rc"] = p.returncode
    return data


def start_run(bot: Path, *, cwd: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cli.main", "run", str(bot), "--store-dir", str(store)],
                            cwd=cwd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run exited before {path.name} appeared: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def crash(proc: subprocess.Popen[str], tool_pid: Path) -> None:
    """SIGKILL the run's process group, then its tool's own group (a tool runs in its own session):
    a crash, nothing recorded on the way out, and no orphaned tool writing afterwards."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=TIMEOUT)
    try:
        os.killpg(int(tool_pid.read_text()), signal.SIGKILL)
    except ProcessLookupError:
        pass


def only_run(store: Path) -> str:
    (doc,) = Store(store).list_runs()
    return doc.id


def events(store: Path, run_id: str, kind: str) -> list[Event]:
    return [e for e in Store(store).read_events(run_id) if e.type == kind]


def move_owner_to_another_host(store: Path, run_id: str) -> None:
    """As if the run had been executed on another machine sharing the store."""
    def edit(doc: Any) -> None:
        doc.owner.host = "another-host"
    Store(store).update_run(run_id, edit)
