"""A garbage number of seconds in the environment, met by a real command: exit 2, one `error:`
line naming the variable and the value as given, a `hint:` line with a value that works, no
traceback, and nothing written (the setting is read before the command changes anything).
The reader itself and every site in-process: test_env_seconds.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import run_cli, write_bot
from .conftest import GATED, Paused, assert_one_error, status_of, store_hash


def _refused(p: object, name: str, raw: str) -> None:
    line = assert_one_error(p)  # type: ignore[arg-type]
    assert line.startswith(f"error: ${name}={raw!r} is not a "), line
    lines = p.stderr.splitlines()  # type: ignore[attr-defined]
    assert lines[-1].startswith(f"hint: unset it or set {name}="), lines
    assert len(lines) == 2, lines


@pytest.mark.parametrize(("name", "raw", "flags"), [
    ("ITERION_RETRY_BACKOFF_S", "abc", []),
    ("ITERION_AUTO_RESUME_BACKOFF_S", "nan", ["--auto-resume", "2"]),
    ("ITERION_PUSH_TIMEOUT_S", "-1", ["--push-checkpoints", "origin"]),
], ids=["retry-backoff", "auto-resume-backoff", "push-timeout"])
def test_run_refuses_before_anything_exists(tmp_path: Path, ws: Path, name: str, raw: str, flags: list[str]) -> None:
    bot = write_bot(tmp_path / "src", GATED)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), *flags, cwd=ws, env={name: raw})
    _refused(p, name, raw)
    assert not (ws / "a.txt").exists() and not (store / "runs").exists()


def test_resume_refuses_and_leaves_the_run_as_it_was(paused: Paused) -> None:
    ws, store, run_id = paused.fresh()
    before = store_hash(store)
    p = run_cli("resume", "--run-id", run_id, "--answer", "approved=true", "--store-dir", str(store), cwd=ws,
                env={"ITERION_RETRY_BACKOFF_S": "1e999"})
    _refused(p, "ITERION_RETRY_BACKOFF_S", "1e999")
    assert store_hash(store) == before and status_of(store, run_id)["status"] == "paused_waiting_human"
    assert not (ws / "b.txt").exists()


@pytest.mark.parametrize(("command", "name", "raw"), [
    (["server", "--port", "0"], "ITERION_SERVER_HANDSHAKE_S", "0"),
    (["runner"], "ITERION_QUEUE_DELAY_SCALE", "lots"),
], ids=["server", "runner"])
def test_long_running_commands_refuse_to_start(tmp_path: Path, command: list[str], name: str, raw: str) -> None:
    p = run_cli(*command, "--store-dir", str(tmp_path / "store"), cwd=tmp_path, env={name: raw}, timeout=60)
    _refused(p, name, raw)
