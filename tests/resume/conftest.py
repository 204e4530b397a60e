"""Fixtures of the resume tests: a workspace (a real git repository), a store dir, a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from iterion.store import Event, Store

from ..conftest import git, write_bot  # noqa: F401 (re-exported to this directory's tests)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("ITERION_STORE_DIR", None)
    env.update(extra or {})
    return env


def cli(*args: str, cwd: Path, store: Path, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`iterion ARGS --store-dir STORE` in a real subprocess."""
    return subprocess.run([sys.executable, "-m", "cli.main", *args, "--store-dir", str(store)], cwd=cwd,
                          env=_env(env), capture_output=True, text=True, timeout=timeout)


def cli_json(*args: str, cwd: Path, store: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    p = cli(*args, "--json", cwd=cwd, store=store, env=env)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON from {args}: rc={p.returncode} stdout={p.stdout!r} stderr={p.stderr!r}") from None


def start_cli(*args: str, cwd: Path, store: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cli.main", *args, "--store-dir", str(store)], cwd=cwd,
                            env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_file(path: Path, proc: subprocess.Popen[str], limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"process exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def only_run(store: Path) -> str:
    (doc,) = Store(store).list_runs()
    return doc.id


def events(store: Path, run_id: str, type: str | None = None) -> list[Event]:
    return [e for e in Store(store).read_events(run_id) if type is None or e.type == type]


def executed(store: Path, run_id: str) -> list[str]:
    cp = Store(store).load_checkpoint(run_id)
    assert cp is not None
    return [f"{e.node}:{e.iteration}" for e in cp.executed]
