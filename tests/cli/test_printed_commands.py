"""Issue 14 point 2: every command iterion prints for a person runs when pasted as printed.

The CLI is invoked three ways (as a module, by the venv's script path, by name on PATH); each
hint run/resume/rewind/inspect print is executed through ``sh -c`` from the same directory.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

SCRIPT = Path(sys.executable).parent / "iterion"


def _env(path_prefix: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ITERION_STORE_DIR", "ITERION_PROG")}
    if path_prefix:
        env["PATH"] = path_prefix + os.pathsep + env.get("PATH", "")
    return env


def sh(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=180)


def printed(text: str, label: str) -> str:
    m = re.search(rf"{label}:? `?(.+?)`?(?: \(add --force.*)?$", text, re.MULTILINE)
    assert m, f"no {label!r} line in:\n{text}"
    return m.group(1)


INVOCATIONS = {
    "module": (f"{shlex.quote(sys.executable)} -m cli.main", None, f"{shlex.quote(sys.executable)} -m cli.main"),
    "script path": (str(SCRIPT), None, str(SCRIPT)),
    "on PATH": ("iterion", str(SCRIPT.parent), "iterion"),
}


@pytest.mark.parametrize("how", list(INVOCATIONS))
def test_every_printed_hint_runs_as_printed(tmp_path: Path, how: str) -> None:
    if how != "module":
        assert SCRIPT.is_file(), "the venv's iterion script is missing"
    prog, path_prefix, expected = INVOCATIONS[how]
    env = _env(path_prefix)
    cwd = tmp_path / "my project"  # a space: paths in printed commands must be quoted
    cwd.mkdir()
    demo = cwd / "demo"
    shutil.copytree(FIXTURES / "demo", demo)
    store = tmp_path / "the store"  # not where a command run from cwd looks: --store-dir printed
    p = sh(f"{prog} run demo/demo.bot --workspace demo --store-dir {shlex.quote(str(store))}", cwd, env)
    assert p.returncode == 4, p.stderr
    answer = printed(p.stderr, "answer with")
    details = printed(p.stderr, "details")
    for cmd in (answer, details):
        assert cmd.startswith(expected + " "), cmd
        assert "--store-dir" in cmd
    d = sh(details, cwd, env)
    assert d.returncode == 0, d.stderr
    assert printed(d.stdout, "continue with") == answer  # inspect prints the same command
    # an error's hint names a command too: it runs
    e = sh(f"{prog} inspect --run-id 0123456789abcdef --store-dir {shlex.quote(str(store))}", cwd, env)
    assert e.returncode == 2
    hint = re.search(r"^hint: .*?`([^`]+)`", e.stderr, re.MULTILINE)
    assert hint and hint.group(1).startswith(expected), e.stderr
    assert sh(hint.group(1), cwd, env).returncode == 0
    # rewind's "continue with" and the resume it prints
    run_id = re.search(r"--run-id (\S+)", answer).group(1)  # type: ignore[union-attr]
    r = sh(f"{prog} rewind --run-id {run_id} --node review --store-dir {shlex.quote(str(store))}", cwd, env)
    assert r.returncode == 0, r.stderr
    cont = re.search(r"continue with `([^`]+)`", r.stdout)
    assert cont and cont.group(1).startswith(expected), r.stdout
    assert "--store-dir" in cont.group(1)
    again = sh(cont.group(1), cwd, env)
    assert again.returncode == 4, again.stderr
    # the answer command printed by that resume is refused pasted unchanged (its placeholders
    # answer nothing: issue 34 point 3), and nothing moves; with the placeholders replaced, it
    # runs as printed and finishes the run
    printed_answer = printed(again.stderr, "answer with")
    refused = sh(printed_answer, cwd, env)
    assert refused.returncode == 2, refused.stderr
    assert "is the placeholder of the printed command" in refused.stderr
    assert "paused_waiting_human" in sh(details, cwd, env).stdout
    filled = printed_answer.replace("<true|false>", "true").replace("<text>", "ship it")
    final = sh(filled, cwd, env)
    assert final.returncode == 0, final.stderr
    assert "finished" in final.stderr
