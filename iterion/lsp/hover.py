"""Hover: what a name stands for (a node's kind and properties, a schema's fields, a prompt's
text, a var's type and default), as markdown."""

from __future__ import annotations

from lsprotocol import types as lsp

from iterion.dsl import ast
from iterion.dsl.unparse import Unwritable, value
from iterion.lsp.analysis import FIELD, FILE, NODE, PROMPT, SCHEMA, VAR, WORKFLOW, Analysis, Decl, Ref

_MAX_VALUE = 200


def _value(v: ast.Value) -> str:
    if isinstance(v, ast.RawText):
        first = v.text.split("\n", 1)[0]
        return f"| {first}..." if "\n" in v.text else f"| {first}"
    if isinstance(v, ast.Block):
        return "{ " + ", ".join(p.name for p in v.properties) + " }"
    try:
        text = value(v)
    except Unwritable:
        return "..."
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE] + "..."


def _schema(d: ast.SchemaDecl) -> str:
    rows = []
    for f in d.fields:
        enum = "" if f.enum is None else " [enum: " + ", ".join(_value(x) for x in f.enum.values) + "]"
        rows.append(f"  {f.name}: {f.type.name}{enum}")
    return "\n".join([f"schema {d.name}:", *rows])


def describe(decl: Decl) -> str:
    """The markdown shown for ``decl``."""
    t = decl.tree
    if isinstance(t, ast.NodeDecl):
        props = "\n".join(f"  {p.name}: {_value(p.value)}" for p in t.properties)
        return f"**{t.kind}** `{t.name}`\n\n```bot\n{t.kind} {t.name}:\n{props}\n```"
    if isinstance(t, ast.SchemaDecl):
        return f"**schema** `{t.name}` ({len(t.fields)} field(s))\n\n```bot\n{_schema(t)}\n```"
    if isinstance(t, ast.PromptDecl):
        return f"**prompt** `{t.name}`\n\n```markdown\n{t.body.text}\n```"
    if isinstance(t, ast.VarDecl):
        default = "" if t.default is None else f" = {_value(t.default)}"
        return f"**var** `{t.name}`: `{t.type.name}`" + (f", default `{_value(t.default)}`" if t.default else ", no default") + \
            f"\n\n```bot\n{t.name}: {t.type.name}{default}\n```"
    if isinstance(t, ast.SchemaFieldDecl):
        enum = "" if t.enum is None else " (enum: " + ", ".join(_value(x) for x in t.enum.values) + ")"
        return f"**field** `{decl.parent}.{t.name}`: `{t.type.name}`{enum}"
    if isinstance(t, ast.WorkflowDecl):
        entry = t.prop("entry")
        return f"**workflow** `{t.name}`" + (f", entry `{_value(entry.value)}`" if entry else "") + \
            f", {len(t.edges)} edge(s)"
    return f"`{decl.name}`"


def hover(analysis: Analysis, item: Decl | Ref | None, rng: lsp.Range) -> lsp.Hover | None:
    if item is None:
        return None
    if isinstance(item, Ref):
        if item.kind == FILE:
            return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=f"file `{item.name}`"),
                             range=rng)
        target = analysis.decl(item.kind, item.key)
        if target is None:
            return None
        item = target
    assert item.kind in (NODE, PROMPT, SCHEMA, VAR, WORKFLOW, FIELD)
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=describe(item)), range=rng)
