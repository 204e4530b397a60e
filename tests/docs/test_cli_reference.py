"""docs/cli-reference.md is the command tree's --help, current: a changed command fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli.reference import REGENERATE, generate
from tests.conftest import REPO_ROOT, cli_env

REFERENCE = REPO_ROOT / "docs" / "cli-reference.md"


def test_the_checked_in_reference_is_current() -> None:
    fresh = generate()
    assert REFERENCE.read_text(encoding="utf-8") == fresh, (
        f"docs/cli-reference.md is stale: regenerate it with `{REGENERATE}` and commit it")


def test_the_reference_names_every_command_with_its_examples(tmp_path: Path) -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    for path in ("iterion run", "iterion resume", "iterion rewind", "iterion inspect", "iterion remote runs events",
                 "iterion refs push", "iterion track undo"):
        assert f"## `{path}`\n" in text, path
    assert text.count("Example: ") > 100  # the examples of every command's help come along
    # the generator run as the doc says writes the same file, wherever it runs from
    out = tmp_path / "ref.md"
    p = subprocess.run([sys.executable, "-m", "cli.reference", str(out)], cwd=REPO_ROOT, check=False,
                       env=cli_env({"COLUMNS": "40"}), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert out.read_text(encoding="utf-8") == text
