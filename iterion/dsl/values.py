"""Plain values of the language: AST value -> Python, type checks, durations."""

from __future__ import annotations

from typing import Any

from iterion import durations
from iterion.dsl import ast


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
    """``"30m"``, ``"1h30m"``, ``"90s"`` -> seconds; None if unreadable (the compiler warns, no limit).

    The one duration grammar (iterion/durations.py) with a unit required: in the language a bare
    ``"5"`` is unreadable as in the original (docs/language.md §2, workflow: a warning, no limit); a
    number of seconds is written as a number literal instead."""
    try:
        return durations.parse_duration(text, bare_seconds=False)
    except durations.DurationError:
        return None


def kind_of(value: ast.Value) -> str:
    if isinstance(value, ast.Literal):
        v = value.value
        return "null" if v is None else {bool: "a bool", int: "an int", float: "a float", str: "a string"}[type(v)]
    return {ast.Ident: "a name", ast.ListValue: "a list", ast.MapValue: "a map", ast.RawText: "a text block",
            ast.Block: "a block"}[type(value)]
