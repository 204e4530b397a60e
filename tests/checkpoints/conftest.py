"""Checkpoint-push fixtures: an operator's checkout whose origin is a bare repository in tmp."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from iterion.store import Store

from ..conftest import git, make_checkout, run_cli, start_cli, wait_for_file, write_bot  # noqa: F401 (re-exported)

GATE = """
schema approval:
  approved: bool

tool make:
  command: "echo made > made.txt && echo more >> README.md"

human gate:
  output: approval
  instructions: "approve?"

tool after:
  command: "echo after > after.txt"

workflow g:
  entry: make
  make -> gate
  gate -> after when approved
  gate -> fail when not approved
  after -> done
"""


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    return bare


@pytest.fixture
def ws(tmp_path: Path, origin: Path) -> Path:
    """The operator's checkout, its main branch pushed to ``origin``."""
    root = make_checkout(tmp_path / "ws")
    git(root, "remote", "add", "origin", str(origin))
    git(root, "push", "-q", "origin", "main")
    return root


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def index_digest(checkout: Path) -> str:
    return hashlib.sha256((checkout / ".git" / "index").read_bytes()).hexdigest()


def fresh_clone(origin: Path, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", str(origin), str(dest))
    return dest


def fetch_in_clone(clone: Path, fetch_command: str) -> str:
    """Run the hint's fetch_command in ``clone`` (origin = the run's repository); FETCH_HEAD."""
    subprocess.run(fetch_command, shell=True, cwd=clone, check=True, capture_output=True)
    return git(clone, "rev-parse", "FETCH_HEAD").strip()


def reject_pushes(origin: Path, message: str = "origin is read-only") -> None:
    """Make ``origin`` refuse every push (a pre-receive hook: works whoever runs the tests)."""
    hook = origin / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    hook.chmod(0o755)


def inspect_json(store_dir: Path, run_id: str, cwd: Path) -> dict[str, Any]:
    proc = run_cli("inspect", "--run-id", run_id, "--json", "--store-dir", str(store_dir), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data

