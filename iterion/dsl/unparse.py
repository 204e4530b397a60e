"""Syntax tree -> `.bot` text: the inverse of the parser, for round-trip checks and tools.

``unparse(parse(text))`` parses back to a tree with the same canonical encoding
(``iterion.dsl.canonical``): comments and blank lines are dropped, indentation is two spaces
per level, every value is written in one spelling: double-quoted where the verbatim reading
gives it back, else a backtick raw string; a value no spelling holds raises ``Unwritable``.
"""

from __future__ import annotations

from iterion.dsl import ast
from iterion.dsl.lexer import RAW_PROPERTIES


class Unwritable(ValueError):
    """A value this printer cannot spell so that it reads back the same."""


def _reads_back_quoted(s: str) -> bool:
    """Does ``"s"`` read back as ``s`` in the default (verbatim) mode? A backslash and the
    character after it are kept as a pair that never ends the string; a bare quote or line
    break does (docs/language.md §1.4)."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            if i + 1 == len(s):
                return False  # it would pair with the closing quote
            i += 2
        elif c in '"\n':
            return False
        else:
            i += 1
    return True


def _string(s: str) -> str:
    """``s`` as a double-quoted string where it reads back verbatim, else as a backtick raw
    string (no escapes, line breaks kept)."""
    if _reads_back_quoted(s):
        return f'"{s}"'
    if "`" not in s:
        return f"`{s}`"
    raise Unwritable(f"string {s!r} holds a backtick and a character a quoted string cannot hold")


def value(v: ast.Value) -> str:
    if isinstance(v, ast.Literal):
        x = v.value
        if x is None:
            return "null"
        if x is True:
            return "true"
        if x is False:
            return "false"
        if isinstance(x, (int, float)):
            return repr(x) if isinstance(x, float) else str(x)
        return _string(x)
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.ListValue):
        return "[" + ", ".join(value(i) for i in v.items) + "]"
    if isinstance(v, ast.MapValue):
        return "{ " + ", ".join(f"{_key(e.key)}: {value(e.value)}" for e in v.entries) + " }"
    raise Unwritable(f"{type(v).__name__} is not an inline value")


def _key(k: str) -> str:
    return k if k.replace("_", "a").isalnum() and not k[:1].isdigit() else _string(k)


def _raw(text: str, indent: str) -> list[str]:
    return [f"{indent}{line}" if line else "" for line in text.split("\n")]


def _props(props: tuple[ast.Property, ...], indent: str) -> list[str]:
    out: list[str] = []
    for p in props:
        out.extend(_prop(p, indent))
    return out


def _prop(p: ast.Property, indent: str) -> list[str]:
    v = p.value
    if isinstance(v, ast.Block):
        return [f"{indent}{_key(p.name)}:", *_props(v.properties, indent + "  ")]
    if isinstance(v, ast.RawText):
        if _is_scalar(p):
            return [f"{indent}{p.name}: |", *_raw(v.text[:-1] if v.text else "", indent + "  ")][: 1 if not v.text else None]
        return [f"{indent}{p.name}:", *_raw(v.text, indent + "  ")]
    return [f"{indent}{_key(p.name)}: {value(v)}"]


def _is_scalar(p: ast.Property) -> bool:
    """Is this raw text written as a block scalar ``key: |`` (its text ends with a newline, or
    is empty), not as the indented raw body some properties take (no trailing newline)?"""
    if not isinstance(p.value, ast.RawText):
        return False
    text = p.value.text
    if text and not text.endswith("\n") and p.name in RAW_PROPERTIES:
        return False
    first = next((line for line in text.split("\n") if line.strip(" \t")), "")
    if first[:1] in (" ", "\t") or (text and not text.endswith("\n")):
        raise Unwritable(f"raw text {text[:40]!r} has no block-scalar spelling")
    return True


def _ends_in_scalar(props: tuple[ast.Property, ...]) -> bool:
    """Does the last line printed for ``props`` belong to a block scalar? Then no blank line may
    follow it: a block scalar keeps the blank lines after its content (docs/language.md §1.4)."""
    if not props:
        return False
    last = props[-1]
    if isinstance(last.value, ast.Block):
        return _ends_in_scalar(last.value.properties)
    return _is_scalar(last)


def _var(v: ast.VarDecl, indent: str) -> str:
    default = "" if v.default is None else f" = {value(v.default)}"
    return f"{indent}{v.name}: {v.type.name}{default}"


def _attachment(a: ast.AttachmentDecl, indent: str) -> list[str]:
    return [f"{indent}{a.name}: {a.kind.name}", *_props(a.properties, indent + "  ")]


def _edge(e: ast.EdgeDecl) -> str:
    text = f"  {e.src.name} -> {e.dst.name}"
    if e.when is not None:
        if e.when.kind == "field":
            text += f" when {e.when.field}"
        elif e.when.kind == "not_field":
            text += f" when not {e.when.field}"
        else:
            assert e.when.expr is not None
            text += f" when {value(e.when.expr)}"
    if e.loop is not None:
        bound = str(e.loop.max) if isinstance(e.loop.max, int) else _string(e.loop.max)
        text += f" as {e.loop.name}({bound})"
    if e.with_map is not None:
        text += f" with {value(e.with_map)}"
    return text


def decl(d: ast.Decl) -> list[str]:
    if isinstance(d, ast.VarsDecl):
        return ["vars:", *(_var(v, "  ") for v in d.vars)]
    if isinstance(d, ast.PresetsDecl):
        out = ["presets:"]
        for p in d.presets:
            out += [f"  {p.name}:", *_props(p.values, "    ")]
        return out
    if isinstance(d, ast.AttachmentsDecl):
        return ["attachments:", *(line for a in d.attachments for line in _attachment(a, "  "))]
    if isinstance(d, ast.PromptDecl):
        return [f"prompt {d.name}:", *_raw(d.body.text, "  ")]
    if isinstance(d, ast.SchemaDecl):
        out = [f"schema {d.name}:"]
        for f in d.fields:
            enum = "" if f.enum is None else " [enum: " + ", ".join(value(x) for x in f.enum.values) + "]"
            out.append(f"  {f.name}: {f.type.name}{enum}")
        return out
    if isinstance(d, ast.NodeDecl):
        return [f"{d.kind} {d.name}:", *_props(d.properties, "  ")]
    if isinstance(d, ast.ImportDecl):
        return [f"import {_string(d.path)}"]
    if isinstance(d, ast.WorkflowDecl):
        out = [f"workflow {d.name}:", *_props(d.properties, "  ")]
        if d.vars:
            out += ["  vars:", *(_var(v, "    ") for v in d.vars)]
        if d.attachments:
            out += ["  attachments:", *(line for a in d.attachments for line in _attachment(a, "    "))]
        return out + [_edge(e) for e in d.edges]
    if isinstance(d, ast.ExtensionDecl):
        if d.name is None:
            return _prop(ast.Property(d.keyword, d.body, d.span), "")
        body = d.body.properties if isinstance(d.body, ast.Block) else ()
        return [f"{d.keyword} {d.name}:", *_props(body, "  ")]
    raise Unwritable(f"{type(d).__name__} has no source form")


def _last_props(d: ast.Decl) -> tuple[ast.Property, ...]:
    if isinstance(d, ast.NodeDecl):
        return d.properties
    if isinstance(d, ast.ExtensionDecl):
        return (ast.Property(d.keyword, d.body, d.span),) if d.name is None else (
            d.body.properties if isinstance(d.body, ast.Block) else ())
    if isinstance(d, ast.WorkflowDecl) and not (d.vars or d.attachments or d.edges):
        return d.properties
    if isinstance(d, ast.PresetsDecl) and d.presets:
        return d.presets[-1].values
    if isinstance(d, (ast.AttachmentsDecl, ast.WorkflowDecl)):
        atts = d.attachments
        if atts and not (isinstance(d, ast.WorkflowDecl) and d.edges):
            return atts[-1].properties
    return ()


def parts(tree: ast.File) -> list[tuple[str, str]]:
    """Each declaration's text with the separator written before it: one blank line between
    declarations (none after a block scalar, which would keep it). ``unparse`` joins them; the
    language server's formatter puts comments back between them."""
    out: list[tuple[str, str]] = []
    for i, d in enumerate(tree.decls):
        sep = "" if not i else "\n" if _ends_in_scalar(_last_props(tree.decls[i - 1])) else "\n\n"
        out.append((sep, "\n".join(decl(d))))
    return out


def unparse(tree: ast.File) -> str:
    """The file's declarations as `.bot` text (see ``parts``)."""
    return "".join(sep + text for sep, text in parts(tree)) + "\n"
