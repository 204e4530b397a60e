"""Shared test set-up: a git identity for the tests' own `git commit` calls, and repo helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.natsserver import NatsServer

# Boundary commits carry iterion's own signature; these are for the `git` commands tests run
# to build fixtures, on machines (CI) that have no global identity.
os.environ.setdefault("GIT_AUTHOR_NAME", "iterion-tests")
os.environ.setdefault("GIT_AUTHOR_EMAIL", "tests@iterion.invalid")
os.environ.setdefault("GIT_COMMITTER_NAME", "iterion-tests")
os.environ.setdefault("GIT_COMMITTER_EMAIL", "tests@iterion.invalid")
# Never read the developer's own global/system git config in tests.
os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
# The recovery dispatcher's in-run retry backoff (iterion/engine/recovery.py, test-only override):
# no real waits between retries; tests that check the backoff's shape set their own base.
os.environ.setdefault("ITERION_RETRY_BACKOFF_S", "0")
# pytest-xdist workers inherit COLUMNS=80/LINES=24; the CLI fits its output to $COLUMNS, so tests
# that mean a pipe (nothing cut) must not see it. Tests about width pass COLUMNS themselves.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
# Printed commands name the program as invoked (iterion/invocation.py): tests run the CLI as
# `python -m cli.main`, so hints would read `<python> -m cli.main resume ...`. Tests that check
# hint wording expect `iterion ...`; the tests of the spelling itself (tests/cli/
# test_printed_commands.py, test_readme_tour.py) remove this variable.
os.environ.setdefault("ITERION_PROG", "iterion")
# The CLI and engine processes the tests start begin from cached bytecode, as an installed iterion
# does: in an environment that sets PYTHONDONTWRITEBYTECODE, each of the suite's hundreds of
# subprocesses would otherwise compile every project module it imports from source again (about
# 0.2 s of CPU per `iterion run`). Writes are atomic, so workers and subprocesses may race.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One real nats-server (JetStream, 127.0.0.1, a random port) per session and xdist worker:
    tests share it and keep apart by their own stream/bucket prefix (a store's namespace)."""
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()
FIXTURES = REPO_ROOT / "fixtures"


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run the real git CLI in ``cwd`` and return its stdout."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def make_checkout(root: Path) -> Path:
    """A fresh non-bare repository at ``root`` with one commit on main."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "initial")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh non-bare repository with one commit on main."""
    return make_checkout(tmp_path / "repo")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An operator's checkout: a git repository with one commit (in-place runs execute here)."""
    return make_checkout(tmp_path / "ws")


def write_bot(directory: Path, text: str, script: dict[str, Any] | None = None, name: str = "wf") -> Path:
    """Write ``name.bot`` (dedented) and, if given, its script backend answers beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.bot"
    path.write_text(textwrap.dedent(text).lstrip())
    if script is not None:
        (directory / f"{name}.script.yaml").write_text(yaml.safe_dump(script))
    return path


def iterion_cmd(*args: str) -> list[str]:
    """argv that runs the installed CLI with this interpreter (works without PATH)."""
    return [sys.executable, "-m", "cli.main", *args]


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(iterion_cmd(*args), cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def store_fingerprint(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (a store, a workspace) -> the SHA-256 of a file's bytes, ``dir``,
    or ``link:TARGET``: equal before and after a refused command means nothing was changed,
    created or removed. A missing ``path`` is ``{}``."""
    import hashlib

    out: dict[str, str] = {}
    if not path.exists():
        return out
    for entry in sorted(path.rglob("*")):
        rel = entry.relative_to(path).as_posix()
        if entry.is_symlink():
            out[rel] = f"link:{os.readlink(entry)}"
        elif entry.is_dir():
            out[rel] = "dir"
        elif entry.is_file():
            out[rel] = hashlib.sha256(entry.read_bytes()).hexdigest()
        else:
            out[rel] = "special"
    return out
