"""The declaration diff knows every construct of dsl.md: an edit of each maps to the node(s)
whose behaviour it can change (what `rewind --auto` rewinds to), issue 12 point 5."""

from __future__ import annotations

import pytest

from iterion.dsl.diff import diff_units

FLOW = """\
cursor tone:
  values:
    terse: "One line per finding."
    detailed: "Explain each finding."

cursor depth:
  bands:
    "0.0..0.5": "Changed lines only."
    "0.51..1.0": "Every caller too."

mcp_server tracker:
  transport: http
  url: "https://mcp.example.org/v1"

mcp_server files:
  transport: stdio
  command: "files-mcp"
  args: ["--root", "."]

prompt escalate:
  Ask a person when unsure.

schema note:
  text: string
  rounds: int

tool setup:
  command: `printf 'base\\n' > a.txt`

agent writer:
  model: "${WRITER_MODEL:-m}"
  provider: "anthropic"
  output: note
  user: "Write."
  interaction: llm_or_human
  interaction_model: "m-answers"
  interaction_prompt: escalate

agent audit:
  model: "m"
  output: note
  user: "Audit {{outputs.writer.text}}."
  cursors:
    tone: terse
    depth: 0.7

agent fetch:
  model: "m"
  output: note
  user: "Fetch."
  tools: [mcp.files.*]
  mcp:
    servers: [tracker]
  sandbox:
    image: "python:3.12"
    network:
      mode: allowlist
      rules: ["pypi.org"]
  memory:
    enabled: true
    scope: "fetch"
  compaction:
    threshold: 0.8
  tool_policy: [read_file]
  capabilities: [board.read]

tool package:
  script: |
    tar -czf out.tgz dist
    echo '{"archive": "out.tgz"}'
  language: bash

workflow chain:
  entry: setup
  vars:
    branch: string = "main"
  attachments:
    spec: file
  compaction:
    threshold: 0.9
  tool_policy: [read_file, grep]
  setup -> writer
  writer -> audit
  audit -> audit as again("{{outputs.writer.rounds}}")
  audit -> fetch
  fetch -> package
  package -> done
"""

EDITS = {
    "cursor values": ('    terse: "One line per finding."', '    terse: "One short line."', "audit"),
    "cursor bands": ('"0.51..1.0": "Every caller too."', '"0.51..1.0": "Every caller and test."', "audit"),
    "cursor setting": ("    depth: 0.7", "    depth: 0.2", "audit"),
    "mcp_server named in mcp.servers": ('v1"', 'v2"', "fetch"),
    "mcp_server named in tools": ('args: ["--root", "."]', 'args: ["--root", "src"]', "fetch"),
    "provider": ('  provider: "anthropic"', '  provider: "zai"', "writer"),
    "env default of a model": ('"${WRITER_MODEL:-m}"', '"${WRITER_MODEL:-m2}"', "writer"),
    "interaction_model": ('"m-answers"', '"m-other"', "writer"),
    "interaction_prompt body": ("  Ask a person when unsure.", "  Ask a person when in doubt.", "writer"),
    "block scalar": ("    tar -czf out.tgz dist\n", "    tar -cJf out.txz dist\n", "package"),
    "block scalar indentation": ("    echo '{\"archive", "      echo '{\"archive", "package"),
    "script language": ("  language: bash", "  language: sh", "package"),
    "backtick string": ("printf 'base\\n'", "printf 'top\\n'", "setup"),
    "node sandbox network": ('rules: ["pypi.org"]', 'rules: ["pypi.org", "github.com"]', "fetch"),
    "node memory": ('    scope: "fetch"', '    scope: "shared"', "fetch"),
    "node compaction": ("    threshold: 0.8", "    threshold: 0.7", "fetch"),
    "node tool_policy": ("  tool_policy: [read_file]\n", "  tool_policy: [read_file, mcp.files.*]\n", "fetch"),
    "node capabilities": ("[board.read]", "[board.read, board.label]", "fetch"),
    "template loop bound": ('again("{{outputs.writer.rounds}}")', 'again("{{vars.branch}}")', "audit"),
    "workflow vars": ('    branch: string = "main"', '    branch: string = "dev"', "setup"),
    "workflow attachments": ("    spec: file", "    spec: image", "setup"),
    "workflow compaction": ("    threshold: 0.9", "    threshold: 0.95", "setup"),
    "workflow tool_policy": ("[read_file, grep]", "[read_file]", "setup"),
}


@pytest.mark.parametrize("construct", sorted(EDITS))
def test_an_edit_maps_to_the_node_it_can_change(construct: str) -> None:
    old, new, node = EDITS[construct]
    assert FLOW.count(old) == 1, old
    d = diff_units({"flow.bot": FLOW}, {"flow.bot": FLOW.replace(old, new)})
    assert d.changes, construct
    assert list(d.impacted) == [node], (construct, [(c.key, c.detail) for c in d.changes], d.impacted)


def test_the_flow_is_valid() -> None:
    from iterion.dsl import load_tree

    result = load_tree({"flow.bot": FLOW}, "flow.bot", env={})
    assert result.ok, [x.format() for x in result.diagnostics]


def test_turning_strict_escape_on_changes_the_quoted_strings_that_hold_backslashes() -> None:
    assert diff_units({"flow.bot": FLOW}, {"flow.bot": "## strict-escape: on\n" + FLOW}).empty  # backticks: raw
    quoted = FLOW.replace("`printf 'base\\n' > a.txt`", "\"printf 'base\\n' > a.txt\"")
    assert quoted != FLOW
    d = diff_units({"flow.bot": quoted}, {"flow.bot": "## strict-escape: on\n" + quoted})
    assert list(d.impacted) == ["setup"]  # only the command holding a backslash reads differently


def test_a_comment_inside_a_block_scalar_is_content() -> None:
    edited = FLOW.replace("    tar -czf out.tgz dist\n", "    tar -czf out.tgz dist\n    ## a note\n")
    assert list(diff_units({"flow.bot": FLOW}, {"flow.bot": edited}).impacted) == ["package"]
    outside = FLOW.replace("tool package:\n", "## a note\ntool package:\n")
    assert diff_units({"flow.bot": FLOW}, {"flow.bot": outside}).empty
