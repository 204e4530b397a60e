"""``.ci/run`` checks lint and types before the tests, and ends with the README's test command.

The checks only keep the code honest if CI runs them, and runs them first: a lint or type error
must fail CI even when every test passes.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def test_ci_fails_fast_and_checks_before_testing() -> None:
    commands = _commands()
    assert "set -euo pipefail" in commands, "without -e a failing check would not fail CI"
    pytest_at = next(i for i, c in enumerate(commands) if " -m pytest" in c)
    ruff_at = next(i for i, c in enumerate(commands) if re.search(r"\bruff check\b", c))
    mypy_at = next(i for i, c in enumerate(commands) if re.search(r"\bmypy gitrefs workspacetrack iterion cli\b", c))
    assert ruff_at < pytest_at and mypy_at < pytest_at


def test_ci_ends_with_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    last = _commands()[-1]
    assert last.startswith(".venv/bin/python -m pytest") and last in readme


def test_ruff_and_mypy_are_installed_by_the_test_extra() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    extra = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    assert '"ruff' in extra and '"mypy' in extra, "the fresh CI venv installs '.[test]' only"
