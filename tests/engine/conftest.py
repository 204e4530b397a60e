"""Fixtures of the engine tests: a workspace (a real git repository), a store, and helpers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.result import RunResult
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.engine.versioning import set_override
from iterion.engine.versioning_memory import use_memory_versioning
from iterion.store import Event, Store

from ..conftest import git, write_bot  # noqa: F401 (re-exported to this directory's tests)


@pytest.fixture
def memory_versioning() -> Iterator[None]:
    """Runs versioned in memory (iterion/engine/versioning_memory.py): for flow tests that need
    neither git nor the snapshot store (tests/versioning/test_contract.py holds it to the contract)."""
    use_memory_versioning()
    try:
        yield
    finally:
        set_override(None)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def launch(store: Store, path: Path, workspace: Path, **kw: Any) -> RunResult:
    kw.setdefault("watch", False)
    return launch_run(store, path, LaunchOptions(workspace=workspace, **kw))


def resume(store: Store, run_id: str, **kw: Any) -> RunResult:
    kw.setdefault("watch", False)
    return resume_run(store, run_id, ResumeOptions(**kw))


def events(store: Store, run_id: str, type: str | None = None) -> list[Event]:
    evs = store.read_events(run_id)
    return [e for e in evs if type is None or e.type == type]


def labels(store: Store, run_id: str) -> list[str]:
    return [e.payload["label"] for e in events(store, run_id, "boundary_written")]
