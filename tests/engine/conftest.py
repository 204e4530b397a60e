"""Fixtures of the engine tests: a workspace (a real git repository), a store, and helpers."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.engine.result import RunResult
from iterion.store import Event, Store


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
    return proc.stdout


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An operator's checkout: a git repository with one commit (in-place runs execute here)."""
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def write_bot(directory: Path, text: str, script: dict[str, Any] | None = None, name: str = "wf") -> Path:
    """Write ``name.bot`` (dedented) and, if given, its script backend answers beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.bot"
    path.write_text(textwrap.dedent(text).lstrip())
    if script is not None:
        (directory / f"{name}.script.yaml").write_text(yaml.safe_dump(script))
    return path


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
