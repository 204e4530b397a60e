"""Helpers of the security tests: the real CLI on real workflows, and a tool that records its argv.

Every test here runs ``iterion`` as a subprocess in a real git checkout, with the ``script``
backend standing in for a model. The recorder (``rec.py``) is the tool under attack: it writes
each argument it received, byte for byte, to ``argv.N`` in the workspace, so a test can compare
what the command got with the text that was substituted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ..claw import conftest as claw_fixtures
from ..conftest import run_cli, write_bot  # noqa: F401 (re-exported to this directory's tests)

# the claw tests' fixtures (a scripted model over real HTTP, both wire formats, a store) for
# test_claw_confinement.py
llm, provider, store = claw_fixtures.llm, claw_fixtures.provider, claw_fixtures.store

RECORDER = """\
import os, sys
for i, arg in enumerate(sys.argv[1:]):
    with open(f"argv.{i}", "wb") as fh:
        fh.write(os.fsencode(arg))
with open("argv.count", "w") as fh:
    fh.write(str(len(sys.argv) - 1))
"""


def attack_vectors(marker_dir: Path) -> dict[str, str]:
    """Texts a hostile person or model would give; each would create a file in ``marker_dir``
    if a shell ever interpreted it."""
    m = marker_dir
    return {
        "semicolon": f"x; touch {m}/semicolon",
        "command_substitution": f"$(touch {m}/dollar)",
        "backticks": f"`touch {m}/backtick`",
        "newline": f"x\ntouch {m}/newline\necho y",
        "single_quotes": f"it's'; touch {m}/single; echo '",
        "double_quotes": f'"; touch {m}/double; echo "',
        "everything": (f"a'b\"c; touch {m}/all1 | touch {m}/all2 && $(touch {m}/all3) `touch {m}/all4`\n"
                       f"touch {m}/all5 > {m}/all6 ${{IFS}}$HOME '\\'' \\n %s"),
    }


@pytest.fixture
def rec(tmp_path: Path) -> Path:
    path = tmp_path / "tools" / "rec.py"
    path.parent.mkdir()
    path.write_text(RECORDER)
    return path


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


def tool_vars(rec: Path) -> list[str]:
    """--var arguments naming the interpreter and the recorder (themselves substituted, quoted)."""
    return ["--var", f"py={sys.executable}", "--var", f"rec={rec}"]


def recorded(ws: Path) -> list[bytes]:
    """The arguments the recorder received, in order, as raw bytes."""
    count = int((ws / "argv.count").read_text())
    return [(ws / f"argv.{i}").read_bytes() for i in range(count)]


def only_run(store: Path) -> str:
    (run,) = [p.name for p in (store / "runs").iterdir()]
    return run


def events(store: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (store / "runs" / run_id / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def outputs(store: Path, run_id: str) -> dict[str, Any]:
    """Each node's latest output, read from the run's node_finished events."""
    return {e["node"]: e["payload"]["output"] for e in events(store, run_id) if e["type"] == "node_finished"}
