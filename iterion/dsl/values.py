"""Plain values of the language: AST value -> Python, type checks, durations."""

from __future__ import annotations

import re
from typing import Any

from iterion.dsl import ast

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def to_py(value: ast.Value) -> Any:
    """A plain Python value (idents read as their name; nested blocks as dicts)."""
    if isinstance(value, ast.Literal):
        return value.value
    if isinstance(value, ast.Ident):
        return value.name
    if isinstance(value, ast.ListValue):
        return [to_py(v) for v in value.items]
    if isinstance(value, ast.MapValue):
        return {e.key: to_py(e.value) for e in value.entries}
    if isinstance(value, ast.RawText):
        return value.text
    return {p.name: to_py(p.value) for p in value.properties}


def type_matches(value: Any, typ: str) -> bool:
    if typ in ("string", "file"):
        return isinstance(value, str)
    if typ == "bool":
        return isinstance(value, bool)
    if typ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if typ == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typ == "string[]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return True  # json


def preset_value_matches(value: Any, typ: str) -> bool:
    """A preset's literal kind for a var type (docs/language.md 2, C071): "string for string/json/string[],
    int or float for float, else same". A bundle's YAML preset may also give string[] a list of
    strings and json a list or mapping (no `.bot` literal has those kinds)."""
    if typ == "json":
        return isinstance(value, (str, list, dict))
    if typ == "string[]":
        return isinstance(value, str) or type_matches(value, typ)
    return type_matches(value, typ)


def parse_duration(text: str) -> float | None:
    """``"30m"``, ``"1h30m"``, ``"90s"`` -> seconds; None if unreadable."""
    s = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and s else None


def kind_of(value: ast.Value) -> str:
    if isinstance(value, ast.Literal):
        v = value.value
        return "null" if v is None else {bool: "a bool", int: "an int", float: "a float", str: "a string"}[type(v)]
    return {ast.Ident: "a name", ast.ListValue: "a list", ast.MapValue: "a map", ast.RawText: "a text block",
            ast.Block: "a block"}[type(value)]
