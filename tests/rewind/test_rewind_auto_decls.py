"""`rewind --auto` (the real CLI) maps an edit of a cursor, an mcp_server, a provider: or a block scalar to the
node that uses it (issue 12 point 5): the declaration diff knows every new construct."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import git
from .rewind_runs import cli

FLOW = """\
cursor tone:
  values:
    terse: "One line per finding."
    detailed: "Explain each finding."

mcp_server tracker:
  transport: http
  url: "https://mcp.example.org/v1"

schema note:
  text: string

tool setup:
  script: |
    printf 'base\\n' > a.txt

agent writer:
  backend: "script"
  provider: "anthropic"
  output: note
  user: "Write."

agent audit:
  backend: "script"
  output: note
  user: "Audit {{outputs.writer.text}}."
  cursors:
    tone: terse

agent fetch:
  backend: "script"
  output: note
  user: "Fetch."
  mcp:
    servers: [tracker]

tool finish:
  command: "printf 'done\\n' >> a.txt && exit 3"

workflow chain:
  entry: setup
  setup -> writer
  writer -> audit
  audit -> fetch
  fetch -> finish
  finish -> done
"""

SCRIPT = '"*":\n  "*": {output: {text: "ok"}}\n'

EDITS = {
    "cursor": (('    terse: "One line per finding."', '    terse: "One short line per finding."'), "audit",
               "cursor tone"),
    "mcp_server": (('  url: "https://mcp.example.org/v1"', '  url: "https://mcp.example.org/v2"'), "fetch",
                   "mcp_server tracker"),
    "provider": (('  provider: "anthropic"', '  provider: "zai"'), "writer", "node writer"),
    "block scalar": (("    printf 'base", "    printf 'start"), "setup", "node setup"),
}


@pytest.mark.parametrize("construct", sorted(EDITS))
def test_auto_rewinds_to_the_node_using_the_edited_declaration(repo: Path, tmp_path: Path, construct: str) -> None:
    store = tmp_path / "store"
    (repo / "flow.bot").write_text(FLOW)
    (repo / "flow.script.yaml").write_text(SCRIPT)
    git(repo, "add", "flow.bot", "flow.script.yaml")
    git(repo, "commit", "-q", "-m", "the bot")
    code, out, err = cli(repo, store, "run", "flow.bot", "--json")
    run = json.loads(out)
    assert run["status"].startswith("failed"), err  # the last node fails: the author edits and rewinds
    run_id = run["run_id"]
    (old, new), node, change = EDITS[construct]
    text = (repo / "flow.bot").read_text()
    assert old in text
    (repo / "flow.bot").write_text(text.replace(old, new))

    code, out, err = cli(repo, store, "rewind", "--run-id", run_id, "--auto")
    assert code == 0, err
    assert change in out and f"impacts {node}" in out, out
    assert f"rewound run {run_id}: finish -> {node}" in out, out
    code, out, err = cli(repo, store, "inspect", "--run-id", run_id, "--json")
    assert code == 0, err
    assert json.loads(out)["checkpoint_node"] == node
