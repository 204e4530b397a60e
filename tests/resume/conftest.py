"""Fixtures of the resume tests: a workspace (a real git repository), a store dir, a CLI runner."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from iterion.store import Event, Store

from ..conftest import git, run_cli, wait_for_file, write_bot  # noqa: F401 (re-exported to this directory's tests)
from ..conftest import start_cli as start_cli_


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


_NO_STORE_ENV = {"ITERION_STORE_DIR": None}  # each test names its store


def cli(*args: str, cwd: Path, store: Path, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`iterion ARGS --store-dir STORE` in a real subprocess."""
    return run_cli(*args, cwd=cwd, store=store, env={**_NO_STORE_ENV, **(env or {})}, timeout=timeout)


def cli_json(*args: str, cwd: Path, store: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    p = cli(*args, "--json", cwd=cwd, store=store, env=env)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON from {args}: rc={p.returncode} stdout={p.stdout!r} stderr={p.stderr!r}") from None


def start_cli(*args: str, cwd: Path, store: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return start_cli_(*args, cwd=cwd, store=store, env={**_NO_STORE_ENV, **(env or {})})


def only_run(store: Path) -> str:
    (doc,) = Store(store).list_runs()
    return doc.id


def events(store: Path, run_id: str, type: str | None = None) -> list[Event]:
    return [e for e in Store(store).read_events(run_id) if type is None or e.type == type]


def executed(store: Path, run_id: str) -> list[str]:
    cp = Store(store).load_checkpoint(run_id)
    assert cp is not None
    return [f"{e.node}:{e.iteration}" for e in cp.executed]
