"""`iterion doctor` (issue 32, point 4): one line per check, credentials named never shown, the
C extension's status, and the slow path said once per process when a capture takes it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, run_cli

NAMES = ["iterion", "python", "git", "pygit2", "C extension", "change journal", "sandbox", "chromium",
         "LLM backend", "store"]


def _doctor(tmp_path: Path, **env: str | None) -> tuple[int, dict[str, dict[str, object]]]:
    p = run_cli("doctor", "--json", cwd=tmp_path, env=env)
    out = json.loads(p.stdout)
    return p.returncode, {c["name"]: c for c in out["checks"]}


def test_doctor_lists_every_check_and_names_credentials_without_values(tmp_path: Path) -> None:
    rc, checks = _doctor(tmp_path, OPENAI_API_KEY="sk-doctor-SECRET-value", ITERION_NATS_URL=None,
                         ANTHROPIC_API_KEY=None, ITERION_PURE=None)
    assert list(checks) == NAMES
    assert rc == 0 and all(c["ok"] for c in checks.values() if c["required"])
    llm = str(checks["LLM backend"]["detail"])
    assert "OPENAI_API_KEY" in llm and "SECRET" not in json.dumps(checks)
    assert str(checks["C extension"]["detail"]).startswith("built:")  # .ci/run requires the extension
    assert checks["pygit2"]["ok"] and "libgit2" in str(checks["pygit2"]["detail"])
    assert str(tmp_path.resolve()) in str(checks["store"]["detail"])  # no repository: the project's .iterion
    plain = run_cli("doctor", cwd=tmp_path, env={"ITERION_NATS_URL": None})
    assert [line.split(":")[0][3:] for line in plain.stdout.splitlines()] == NAMES


def test_a_set_but_unreachable_nats_fails_the_doctor_with_a_fix(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        rc, checks = _doctor(tmp_path, ITERION_NATS_URL=f"nats://127.0.0.1:{port}")
    assert rc == 1 and not checks["nats"]["ok"] and checks["nats"]["fix"]
    assert "NATS JetStream" in str(checks["store"]["detail"])


def test_iterion_pure_opts_out_of_the_extension(tmp_path: Path) -> None:
    _rc, checks = _doctor(tmp_path, ITERION_PURE="1")
    assert checks["C extension"]["ok"] and str(checks["C extension"]["detail"]).startswith("pure:")


def _run_demo_without_extension(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The demo run (two captures or more) in a process where the C extension cannot be imported."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("demo.bot", "demo.script.yaml", "answers.json"):
        (ws / name).write_bytes((REPO_ROOT / "fixtures" / "demo" / name).read_bytes())
    code = ("import sys\nsys.modules['workspacetrack._fastwalk'] = None  # as if it was never built\n"
            f"sys.argv = ['iterion', 'run', 'demo.bot', '--answers-file', 'answers.json', '--store-dir', "
            f"{str(tmp_path / 'store')!r}]\nfrom cli.main import main\nmain()")
    base = {k: v for k, v in os.environ.items() if k not in ("ITERION_PURE", "ITERION_QUIET")}
    return subprocess.run([sys.executable, "-c", code], cwd=ws, capture_output=True, text=True, check=False,
                          env={**base, "PYTHONPATH": str(REPO_ROOT), **env}, timeout=120)


def test_a_capture_on_the_slow_path_says_so_once_per_process(tmp_path: Path) -> None:
    p = _run_demo_without_extension(tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("captures use the slow pure-Python walk") == 1, p.stderr
    assert "not built" in p.stderr and "iterion doctor" in p.stderr


def test_the_slow_path_note_is_silenced_by_iterion_quiet(tmp_path: Path) -> None:
    p = _run_demo_without_extension(tmp_path, ITERION_QUIET="1")
    assert p.returncode == 0, p.stderr
    assert "slow pure-Python walk" not in p.stderr
