"""The heavy tier (pyproject's `heavy` marker) is left out of the README's test command and run by
CI right after it, so a test moved there still runs on every CI run."""

from __future__ import annotations

import shlex
import tomllib

from tests.conftest import REPO_ROOT


def test_the_heavy_tier_is_left_out_by_default_and_run_by_ci_after_the_main_suite() -> None:
    pytest_conf = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = shlex.split(pytest_conf["addopts"])
    assert addopts[addopts.index("-m") + 1] == "not heavy"
    assert any(m.startswith("heavy:") for m in pytest_conf["markers"])
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    main = ci.index(".venv/bin/python -m pytest -q -n 2")
    assert ".venv/bin/python -m pytest -q -n 2 -m heavy" in ci[main + 1:]
    readme = (REPO_ROOT / "README.md").read_text()
    assert "\n.venv/bin/python -m pytest -q -n 2\n" in readme and "-m heavy" in readme
    marked = [p for p in (REPO_ROOT / "tests").rglob("test_*.py")
              if p.name != "test_test_tiers.py" and "pytest.mark.heavy" in p.read_text()]
    assert len(marked) >= 4, marked  # the tier holds real tests
