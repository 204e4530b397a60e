"""Numbers of seconds read from the environment: one reader (gitrefs/persist/envsettings.py), the same
refusal everywhere. Garbage (`abc`, `nan`, `-1`, `1e999`, a unit suffix) is refused in one line
naming the variable and the value as given, with a hint holding a value that works; unset or
blank is the default; a valid value is the one used. Importing a module never reads them.

The CLI's side (exit 2, `error:` + `hint:`, no traceback, nothing written) is
test_env_seconds_cli.py; a node's side (the run fails naming the variable) is
tests/claw/test_claw_env_settings.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gitrefs.persist import UserError
from gitrefs.persist.envsettings import EnvSettingError, env_number, env_seconds

GARBAGE = ["abc", "nan", "-1", "1e999", "inf", "10s", "1e10", "0x10"]


def _one_line_refusal(exc: UserError, name: str, raw: str) -> None:
    assert "\n" not in exc.message and f"${name}={raw!r} is not" in exc.message, exc.message
    assert exc.hint is not None and exc.hint.startswith(f"unset it or set {name}=") and "\n" not in exc.hint
    assert exc.exit_code == 2


@pytest.mark.parametrize("raw", GARBAGE)
def test_garbage_is_refused_in_one_line_naming_the_variable(raw: str) -> None:
    with pytest.raises(EnvSettingError) as info:
        env_seconds("X_WAIT_S", 120.0, zero_ok=False, environ={"X_WAIT_S": raw})
    _one_line_refusal(info.value, "X_WAIT_S", raw)
    assert info.value.hint == "unset it or set X_WAIT_S=120"


def test_unset_and_blank_are_the_default_and_numbers_are_read() -> None:
    for env in ({}, {"X_S": ""}, {"X_S": "  "}):
        assert env_seconds("X_S", 7.0, environ=env) == 7.0
    assert env_seconds("X_S", 7.0, environ={"X_S": " 2.5 "}) == 2.5
    assert env_seconds("X_S", 7.0, environ={"X_S": "1e3"}) == 1000.0
    assert env_seconds("X_S", 7.0, environ={"X_S": "0"}) == 0.0
    with pytest.raises(EnvSettingError, match=r"> 0"):
        env_seconds("X_S", 7.0, zero_ok=False, environ={"X_S": "0"})
    assert env_number("X_SCALE", 1.0, what="a factor", environ={"X_SCALE": "0.01"}) == 0.01


def test_a_value_with_a_newline_stays_one_line() -> None:
    with pytest.raises(EnvSettingError) as info:
        env_seconds("X_S", 1.0, environ={"X_S": "5\nrm -rf /"})
    _one_line_refusal(info.value, "X_S", "5\nrm -rf /")


# every site that reads one: (variable, the reader as its caller calls it, the default)
def _push() -> float:
    from gitrefs.checkpoint_push import push_timeout_s
    return push_timeout_s()


def _auto_resume() -> float:
    from iterion.engine.auto_resume import Backoff
    return Backoff.from_env().base_s


def _retry() -> float:
    from iterion.engine.recovery import RecoveryPolicy
    return RecoveryPolicy.from_env().backoff.base_s


def _stale() -> float:
    from iterion.engine.stale import stale_after_s
    return stale_after_s()


def _handshake() -> float:
    from iterion.server.service import _handshake_timeout_s
    return _handshake_timeout_s()


def _grace() -> float:
    from iterion.engine.procgroup import child_grace_s
    value = child_grace_s()
    assert value is not None
    return value


def _delay_scale() -> float:
    from iterion.queue.policy import delay_scale
    return delay_scale()


SITES: list[tuple[str, Callable[[], float], float]] = [
    ("ITERION_PUSH_TIMEOUT_S", _push, 120.0),
    ("ITERION_AUTO_RESUME_BACKOFF_S", _auto_resume, 2.0),
    ("ITERION_RETRY_BACKOFF_S", _retry, 1.0),
    ("ITERION_STALE_AFTER_S", _stale, 60.0),
    ("ITERION_SERVER_HANDSHAKE_S", _handshake, 120.0),
    ("ITERION_TOOL_CHILD_GRACE_S", _grace, 2.0),
    ("ITERION_QUEUE_DELAY_SCALE", _delay_scale, 1.0),
]


@pytest.mark.parametrize(("name", "read", "default"), SITES, ids=[s[0] for s in SITES])
def test_every_site_refuses_garbage_and_uses_a_valid_value(monkeypatch: pytest.MonkeyPatch, name: str,
                                                           read: Callable[[], float], default: float) -> None:
    for raw in ("abc", "nan", "-1", "1e999"):
        monkeypatch.setenv(name, raw)
        with pytest.raises(EnvSettingError) as info:
            read()
        _one_line_refusal(info.value, name, raw)
    monkeypatch.setenv(name, "")
    assert read() == default
    monkeypatch.setenv(name, "3.5")
    assert read() == 3.5


def test_the_grace_keeps_its_word_and_its_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from iterion.engine.errors import GraceSettingError
    from iterion.engine.procgroup import child_grace_s

    monkeypatch.setenv("ITERION_TOOL_CHILD_GRACE_S", " Keep ")
    assert child_grace_s() is None
    monkeypatch.setenv("ITERION_TOOL_CHILD_GRACE_S", "soon")
    with pytest.raises(GraceSettingError) as info:
        child_grace_s()
    assert info.value.message == "$ITERION_TOOL_CHILD_GRACE_S='soon' is not a number of seconds >= 0 or 'keep'"


@pytest.mark.parametrize("variable", ["ITERION_OPENAI_TIMEOUT", "ITERION_MCP_START_TIMEOUT"])
def test_a_garbage_backend_timeout_fails_as_a_missing_key_does(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    from iterion.backends.base import BackendError, setting_seconds
    from iterion.failure_codes import FailureCode

    monkeypatch.setenv(variable, "1e999")
    with pytest.raises(BackendError) as info:
        setting_seconds(variable, 30.0)
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    assert info.value.message.startswith(f"${variable}='1e999' is not a number of seconds > 0")
    assert f"set {variable}=30" in info.value.message


def test_openai_backend_reads_its_timeout_at_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from iterion.backends import get_backend
    from iterion.backends.base import BackendError

    monkeypatch.setenv("ITERION_OPENAI_TIMEOUT", "abc")
    backend = get_backend("openai", {"base_url": "http://127.0.0.1:9/v1"})  # construction does not read it
    ok, detail = backend.availability()
    assert not ok and "$ITERION_OPENAI_TIMEOUT='abc'" in detail
    with pytest.raises(BackendError, match=r"ITERION_OPENAI_TIMEOUT='abc'"):
        backend.timeout_s  # noqa: B018
    monkeypatch.setenv("ITERION_OPENAI_TIMEOUT", "42")
    assert backend.timeout_s == 42.0
    monkeypatch.setenv("ITERION_OPENAI_TIMEOUT", "nan")
    assert get_backend("claw", {}).availability() == (
        False, "$ITERION_OPENAI_TIMEOUT='nan' is not a number of seconds > 0 (unset it or set ITERION_OPENAI_TIMEOUT=600)")


def test_importing_never_reads_the_environment(tmp_path: Path) -> None:
    """A garbage value in the environment cannot break an import (the MCP limits were float()ed
    at import; the server's handshake was read at import)."""
    env = {"ITERION_MCP_START_TIMEOUT": "abc", "ITERION_MCP_CALL_TIMEOUT": "nan",
           "ITERION_SERVER_HANDSHAKE_S": "-1", "ITERION_OPENAI_TIMEOUT": "x", "ITERION_PUSH_TIMEOUT_S": "1e999"}
    code = ("import iterion.backends.claw.mcp, iterion.backends.claw, iterion.backends.openai, "
            "iterion.server.service, gitrefs.checkpoint_push, iterion.engine.procgroup; print('imported')")
    p = subprocess.run([sys.executable, "-c", code], env={**_base_env(), **env}, capture_output=True, text=True,
                       cwd=tmp_path, timeout=60, check=False)
    assert p.returncode == 0 and p.stdout.strip() == "imported", p.stderr


def _base_env() -> dict[str, str]:
    from ..conftest import cli_env
    return cli_env()
