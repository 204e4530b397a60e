"""Shared files of the subbot tests: a child workflow that parks at a human gate, and its parent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git

CHILD = '''vars:
  task: string
schema answer:
  ok: bool
human gate:
  instructions: "Approve {{vars.task}}?"
  output: answer
compute wrap:
  expr:
    approved: "outputs.gate.ok"
    task: "vars.task"
workflow child:
  entry: gate
  gate -> wrap
  wrap -> done
'''

PARENT = '''vars:
  topic: string = "docs"
subbot kid:
  source: "bots/child.bot"
  with:
    task: "write {{vars.topic}}"
compute after:
  expr:
    seen: "outputs.kid.approved"
    task: "outputs.kid.task"
workflow parent:
  entry: kid
  kid -> after
  after -> done
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository holding parent.bot and bots/child.bot."""
    root = tmp_path / "proj"
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "child.bot").write_text(CHILD)
    (root / "parent.bot").write_text(PARENT)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "bots")
    return root


def run_docs(project: Path) -> dict[str, dict[str, Any]]:
    """Every run document of the project's store, by run id."""
    runs = project / ".git" / "iterion" / "store" / "runs"
    return {p.parent.name: json.loads(p.read_text()) for p in runs.glob("*/run.json")}
