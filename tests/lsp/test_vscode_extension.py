"""editors/vscode is a consistent extension: the manifest names files that exist, launches
`iterion lsp` by default, and the TextMate grammar's patterns compile and match the language
(`npx @vscode/vsce package` builds it: docs/editors.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from tests.conftest import REPO_ROOT

EXT = REPO_ROOT / "editors" / "vscode"


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key in ("match", "begin", "end"):
            if key in node:
                yield node[key]
        for v in node.values():
            yield from _patterns(v)
    elif isinstance(node, list):
        for v in node:
            yield from _patterns(v)


def test_manifest_language_and_client() -> None:
    pkg = json.loads((EXT / "package.json").read_text())
    (lang,) = pkg["contributes"]["languages"]
    assert lang["extensions"] == [".bot", ".iter"]
    assert (EXT / lang["configuration"]).is_file() and (EXT / pkg["main"]).is_file()
    (grammar,) = pkg["contributes"]["grammars"]
    assert (EXT / grammar["path"]).is_file() and grammar["language"] == lang["id"]
    props = pkg["contributes"]["configuration"]["properties"]
    assert props["iterion.command"]["default"] == "iterion" and props["iterion.args"]["default"] == ["lsp"]
    assert "vscode-languageclient" in pkg["dependencies"]
    assert "vscode-languageclient/node" in (EXT / pkg["main"]).read_text()
    conf = json.loads((EXT / "language-configuration.json").read_text())
    assert conf["comments"]["lineComment"] == "##"
    assert json.loads((EXT / "package-lock.json").read_text())["name"] == pkg["name"]
    assert "node_modules/" in (EXT / ".gitignore").read_text().split()


def test_grammar_patterns_compile_and_match_the_language() -> None:
    grammar = json.loads((EXT / "syntaxes" / "bot.tmLanguage.json").read_text())
    for pattern in _patterns(grammar):
        re.compile(pattern)
    repo = grammar["repository"]
    decl = re.compile(repo["declaration"]["match"])
    assert decl.match("agent write:").group(1, 2) == ("agent", "write")
    assert decl.match("schema judgement:").group(1) == "schema"
    edge = re.compile(repo["edge"]["match"])
    assert edge.match("  critic -> write when not ok as polish(4)").group(1, 3, 4) == ("critic", "write", "when")
    assert re.search(repo["comment"]["match"], "  ## note").group() == "## note"
    assert re.search(repo["template"]["begin"], "say {{outputs.a.b}}")
    prompt = repo["prompt"]  # a prompt's body runs to the next line at the margin
    assert re.match(prompt["begin"], "prompt writer_system:") and re.match(prompt["end"], "agent a:")
    assert not re.match(prompt["end"], "  ## a markdown heading")
