"""Shared pieces of the takeover fault tests: the CLI as a real subprocess (its own process group,
so a SIGKILL takes the whole run down like a crash would), and waiting for a marker file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from iterion.store import Event, Store

from ..conftest import cli_env, run_cli, start_cli, wait_for_file
TIMEOUT = 120  # the only time limit: a generous bound on one subprocess


def _overlay(extra: dict[str, str] | None = None) -> dict[str, str | None]:
    """No store or staleness setting of the developer's; `iterion` on PATH, as commands are printed."""
    return {"ITERION_STORE_DIR": None, "ITERION_STALE_AFTER_S": None,
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""), **(extra or {})}


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return cli_env(_overlay(extra))


def cli(*args: str, cwd: Path, store: Path, extra_env: dict[str, str] | None = None,
        no_store: bool = False) -> subprocess.CompletedProcess[str]:
    """`iterion ARGS --store-dir STORE` (``no_store``: a command without that option, e.g. `track`)."""
    return run_cli(*args, cwd=cwd, store=None if no_store else store, env=_overlay(extra_env), timeout=TIMEOUT)


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
    return start_cli("run", str(bot), cwd=cwd, store=store, env=_overlay(), start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    wait_for_file(path, proc, limit=TIMEOUT)


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
