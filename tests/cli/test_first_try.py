"""Issue 34 point 4: first-try rough edges a new user met, each through the real CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import cli_env

SCRIPT = Path(sys.executable).parent / "iterion"


def _sh(cmd: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    e = cli_env({"ITERION_STORE_DIR": None, "ITERION_PROG": None, **env})
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, env=e, check=False, capture_output=True, text=True,
                          timeout=180)


def test_init_next_step_runs_after_its_own_cd_when_invoked_by_a_relative_path(tmp_path: Path) -> None:
    assert SCRIPT.is_file(), "the venv's iterion script is missing"
    relative = os.path.relpath(SCRIPT, tmp_path)  # e.g. ../../work/x/.venv/bin/iterion
    assert not relative.startswith("/") and "/" in relative
    made = _sh(f"{relative} init my-demo", tmp_path)
    assert made.returncode == 0, made.stderr
    m = re.search(r"^next: (.+)$", made.stdout, re.MULTILINE)
    assert m, made.stdout
    step = m.group(1)
    assert step.startswith("cd my-demo && /"), step  # the program named absolutely: found after the cd
    ran = _sh(step, tmp_path)
    assert ran.returncode == 4, ran.stderr  # the demo parks at its gate: it ran
    assert "paused_waiting_human" in ran.stderr
