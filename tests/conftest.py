"""Shared test set-up: a git identity for the tests' own `git commit` calls, and repo helpers.

The one home of the helpers that start a process of the tests (issue 18, point 4): ``git``
runs the real git CLI; ``run_cli``/``cli_json``/``start_cli`` run this checkout's CLI
(``iterion_cmd``); ``wait_for_file`` waits for a marker a started process writes. A test
directory's own helpers adapt these (their signatures, what they return), never spawn.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping
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


def _tmpfs_root(need: int = 4 * 2**30) -> str | None:
    """/dev/shm when it is a writable tmpfs with ``need`` bytes free (a container's default 64 MiB
    is not enough for the suite's 50 MB binaries), else None."""
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    return shm if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize >= need else None


# Every tmp_path and tmp_path_factory directory on tmpfs when there is room (pytest reads
# PYTEST_DEBUG_TEMPROOT as the root of its numbered base directories, retention included): still
# real files, renames, modes, links, sparse files and mounts, but the product's atomic writes
# (every event, run document and stored object is fsynced, file and directory) no longer wait
# for a shared disk: ~7 ms per write on this machine's ext4, thousands per suite run.
# faults/faultlib.fast_dir did this for the kill series alone. pyproject's
# tmp_path_retention_policy = "failed" keeps only failed tests' directories, so passed tests
# free their memory as they end.
if "PYTEST_DEBUG_TEMPROOT" not in os.environ and (_shm := _tmpfs_root()) is not None:
    os.environ["PYTEST_DEBUG_TEMPROOT"] = _shm


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One real nats-server (JetStream, 127.0.0.1, a random port) per session and xdist worker:
    tests share it and keep apart by their own stream/bucket prefix (a store's namespace)."""
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


@pytest.fixture
def own_nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A nats-server of this test alone: for a test that restarts or stops it (doing that to the
    shared one would fail whatever else runs on it, and a restart of a server every test of the
    worker wrote into replays all of their streams)."""
    server = NatsServer(tmp_path / "own-nats").start()
    yield server
    server.stop()


FIXTURES = REPO_ROOT / "fixtures"


# a stray GIT_DIR (a test run from a git hook) would point every git call at another repository
_GIT_LOCATION = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE")


def git(cwd: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None,
        input: str | None = None) -> str:
    """Run the real git CLI in ``cwd`` and return its stdout (``check``: a failure raises)."""
    full = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION}
    full.update(env or {})
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=full, input=input)
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


def cli_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: this one, the checkout first on PYTHONPATH (the CLI
    under test is this tree's), then ``env`` on top (a None value removes the variable)."""
    out = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _argv(args: tuple[str, ...], store: Path | None) -> list[str]:
    return iterion_cmd(*args, *(("--store-dir", str(store)) if store is not None else ()))


def run_cli(*args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
            store: Path | None = None, timeout: float = 120, text: bool = True,
            input: str | None = None) -> subprocess.CompletedProcess[Any]:
    """`iterion ARGS [--store-dir STORE]` in a real subprocess, to completion (bytes if not ``text``)."""
    return subprocess.run(_argv(args, store), cwd=cwd, env=cli_env(env), capture_output=True, text=text,
                          timeout=timeout, input=input, check=False)


def cli_json(*args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
             store: Path | None = None, timeout: float = 120) -> dict[str, Any]:
    """``run_cli(*args, "--json")``'s stdout, parsed; no JSON fails with the exit code and stderr."""
    proc = run_cli(*args, "--json", cwd=cwd, env=env, store=store, timeout=timeout)
    assert proc.stdout.strip(), f"exit {proc.returncode}: {proc.stderr}"
    try:
        out: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON from {args}: rc={proc.returncode} out={proc.stdout!r} "
                             f"err={proc.stderr!r}") from None
    return out


def start_cli(*args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
              store: Path | None = None, **popen: Any) -> subprocess.Popen[Any]:
    """`iterion ARGS [--store-dir STORE]` started and left running (stdout and stderr piped as
    text unless ``popen`` says otherwise; ``start_new_session=True`` for a process group a
    SIGKILL takes down whole, like a crash)."""
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    return subprocess.Popen(_argv(args, store), cwd=cwd, env=cli_env(env), **popen)


def kill_process(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc``, and its whole group when it leads one (``start_new_session``)."""
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
            return
    except ProcessLookupError:
        return
    proc.kill()


def wait_for_file(path: Path, proc: subprocess.Popen[Any] | None = None, limit: float = 60) -> None:
    """Block until ``path`` exists (a marker the process writes). Fails when ``proc`` exits
    first (with its output) or after ``limit`` seconds (killing it)."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited before {path.name} appeared: {proc.communicate()}")
        if time.monotonic() > deadline:
            if proc is not None:
                kill_process(proc)
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


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


def save_template(live: Path, template: Path) -> None:
    """Copy ``live`` (a workspace and store a run left) to ``template``, modes, links and times kept.

    A set-up built once (a module or session fixture) is then handed to each case as a fresh copy
    by ``restore_template``, back at the SAME absolute path: run documents and snapshot stores
    record absolute paths, so a copy elsewhere would not be the same run."""
    subprocess.run(["cp", "-a", str(live), str(template)], check=True)


def restore_template(template: Path, live: Path) -> None:
    """Replace ``live`` by a byte-identical copy of ``template`` (see ``save_template``)."""
    if live.exists():
        shutil.rmtree(live)
    subprocess.run(["cp", "-a", str(template), str(live)], check=True)


_REAL_TIER = REPO_ROOT / "tests" / "real"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/real (real model and MCP servers, README "Real-model tier") runs only when named:
    ``pytest tests/real``; the main suite does not start a model server."""
    if collection_path != _REAL_TIER:
        return None
    named = [Path(str(a).split("::")[0]).resolve() for a in config.args]
    return not any(p == _REAL_TIER or _REAL_TIER in p.parents for p in named)
