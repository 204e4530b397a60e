"""Shared files of the subbot tests: a child workflow that parks at a human gate, and its parent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

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
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root
