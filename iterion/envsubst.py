"""Environment substitution in workflow strings: the one home of the three forms of docs/language.md §1.7.

The compiler never expands ``${...}``: strings reach the IR as written, and each property is
expanded when the language says (docs/language.md, 1. Lexical rules), by the function named for that moment:

- ``expand_node``: ``model``, ``backend``, ``provider``, ``interaction_model``, cursor values,
  a quoted ``reasoning_effort`` -- when the node runs. ``${N}``, ``${N:-d}`` (the default when N
  is unset **or empty**), nested defaults ``${A:-${B:-d}}``, and bare ``$NAME``.
- ``expand_command``: a tool's ``command:``/``script:``, before template substitution. Braced
  only: ``${N}``, ``${N:-d}`` (default when N is unset), no nesting; an unset ``${N}`` without a
  default, or a ``${...}`` that is not a plain name, stays verbatim; bare ``$x`` is the shell's.
- ``expand_launch``: string var defaults and ``--var`` values (run start), ``mcp_server``
  ``command``/``args``/``url`` (launch). ``$N`` and ``${N}``; no ``:-`` (the whole brace content
  is the name looked up, so ``${N:-d}`` reads as unset); an unset name is empty.

Pure functions of (text, env): nothing here reads ``os.environ`` by itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMAND = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^{}]*))?\}")
_LAUNCH = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_MAX_DEPTH = 32  # nested defaults deeper than this are left as written
# names the run sets for run-start expansion (string var defaults, --var values): "PROJECT_DIR
# = the run's workspace" (docs/language.md §1), so never "unset" at validation (no C110)
RUN_START_NAMES = frozenset({"PROJECT_DIR"})


def expand_node(text: str, env: Mapping[str, str]) -> str:
    """Node-run-time expansion (see the module docstring)."""
    if "$" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        if text[i + 1] == "{":
            got = _braced(text, i, env, 0)
            if got is None:
                out.append(c)
                i += 1
                continue
            value, i = got
            out.append(value)
            continue
        m = _NAME.match(text, i + 1)
        if m is None:
            out.append(c)
            i += 1
            continue
        out.append(env.get(m.group(), ""))
        i = m.end()
    return "".join(out)


def _braced(text: str, start: int, env: Mapping[str, str], depth: int) -> tuple[str, int] | None:
    """``${NAME}`` or ``${NAME:-default}`` at ``start`` -> (value, end); None if not well formed."""
    m = _NAME.match(text, start + 2)
    if m is None or depth > _MAX_DEPTH:
        return None
    name = m.group()
    j = m.end()
    if text.startswith("}", j):
        return env.get(name, ""), j + 1
    if not text.startswith(":-", j):
        return None
    j += 2
    parts: list[str] = []
    while j < len(text):
        c = text[j]
        if c == "}":
            value = env.get(name, "")
            return (value if value != "" else "".join(parts)), j + 1
        if c == "$" and text.startswith("${", j):
            inner = _braced(text, j, env, depth + 1)
            if inner is None:
                return None
            parts.append(inner[0])
            j = inner[1]
            continue
        if c == "$":
            m2 = _NAME.match(text, j + 1)
            if m2 is not None:
                parts.append(env.get(m2.group(), ""))
                j = m2.end()
                continue
        parts.append(c)
        j += 1
    return None  # no closing brace: left as written


def expand_command(text: str, env: Mapping[str, str]) -> str:
    """Tool command/script expansion (see the module docstring)."""
    if "${" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        return default if default is not None else m.group(0)

    return _COMMAND.sub(repl, text)


def expand_launch(text: str, env: Mapping[str, str]) -> str:
    """Run-start / launch expansion (see the module docstring)."""
    if "$" not in text:
        return text
    return _LAUNCH.sub(lambda m: env.get(m.group(1) if m.group(1) is not None else m.group(2), ""), text)


def unset_plain_refs(text: str, env: Mapping[str, str]) -> list[tuple[int, str]]:
    """(offset, name) of each ``${NAME}`` without a default whose variable is unset (C110)."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text)
            if m.group(1) not in env]
