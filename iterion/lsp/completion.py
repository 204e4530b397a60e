"""Completion from the text before the cursor: template references after ``{{``, node names in
an edge, the properties a node kind takes, prompts after system:/user:, schemas after input:/output:."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from iterion.dsl import ast
from iterion.dsl.grammar import NODE_KINDS, NODE_PROPERTIES, TERMINAL_NAMES, WORKFLOW_PROPERTIES
from iterion.lsp.analysis import NODE, PROMPT, SCHEMA, VAR, Analysis

_PROMPT_PROPS = ("system", "user", "instructions", "interaction_prompt")
_SCHEMA_PROPS = ("input", "output")
_HEADER = re.compile(r"^(\w+)\s+(\w+)\s*:")


def _items(names: list[str], kind: lsp.CompletionItemKind, detail: str) -> list[lsp.CompletionItem]:
    return [lsp.CompletionItem(label=n, kind=kind, detail=detail) for n in dict.fromkeys(names)]


def _block_of(lines: list[str], row: int) -> str | None:
    """The keyword of the top-level declaration holding line ``row`` (0-based)."""
    for i in range(row, -1, -1):
        line = lines[i]
        if line and not line[0].isspace() and not line.startswith("##"):
            m = _HEADER.match(line)
            return m.group(1) if m else line.split(":")[0].strip()
    return None


def complete(analysis: Analysis, lines: list[str], row: int, col: int) -> list[lsp.CompletionItem]:
    before = lines[row][:col] if row < len(lines) else ""
    nodes = [d.name for d in analysis.named(NODE)]
    open_at = before.rfind("{{")
    if open_at >= 0 and "}}" not in before[open_at:]:
        ref = before[open_at + 2:].strip()
        if ref.startswith("outputs."):
            parts = ref.split(".")
            if len(parts) >= 3:  # outputs.NODE.: the fields of its output schema
                node = analysis.decl(NODE, parts[1])
                out = node.tree.prop("output") if node and isinstance(node.tree, ast.NodeDecl) else None
                if out is not None and isinstance(out.value, ast.Ident):
                    fields = [d.name for d in analysis.decls if d.kind == "field" and d.parent == out.value.name]
                    return _items(fields, lsp.CompletionItemKind.Field, f"field of {out.value.name}")
                return []
            return _items(nodes, lsp.CompletionItemKind.Class, "node")
        if ref.startswith("vars."):
            return _items([d.name for d in analysis.named(VAR)], lsp.CompletionItemKind.Variable, "var")
        return _items(["outputs.", "vars.", "input.", "loop.", "artifacts.", "attachments.", 'include "'],
                      lsp.CompletionItemKind.Keyword, "template reference")
    block = _block_of(lines, row) if row < len(lines) else None
    prop = re.match(r"^\s+(\w+)\s*:\s*\w*$", before)
    if prop and block in NODE_KINDS:
        if prop.group(1) in _PROMPT_PROPS:
            return _items([d.name for d in analysis.named(PROMPT)], lsp.CompletionItemKind.Text, "prompt")
        if prop.group(1) in _SCHEMA_PROPS:
            return _items([d.name for d in analysis.named(SCHEMA)], lsp.CompletionItemKind.Struct, "schema")
        return []
    if block == "workflow":
        if re.search(r"->\s*\w*$", before):
            return _items([*nodes, *TERMINAL_NAMES], lsp.CompletionItemKind.Class, "node")
        if prop and prop.group(1) == "entry":
            return _items(nodes, lsp.CompletionItemKind.Class, "node")
        if re.match(r"^\s+\w*$", before):
            return [*_items(nodes, lsp.CompletionItemKind.Class, "node"),
                    *_items([*WORKFLOW_PROPERTIES, "vars"], lsp.CompletionItemKind.Property, "workflow property")]
    if block in NODE_PROPERTIES and re.match(r"^\s+\w*$", before):
        return _items(list(NODE_PROPERTIES[block]), lsp.CompletionItemKind.Property, f"{block} property")
    return []
