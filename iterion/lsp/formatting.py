"""Formatting through the canonical unparser, only where the result is the same document.

The unparser writes declarations only; the formatter puts back the ``##`` comment lines that
stand at the left margin before a declaration (a file's header, a note above a node) and at
the end of the file. A document is formatted only when it parses without errors, its values
can be written, the result parses back to the same canonical encoding (what `rewind --auto`
compares) with the same diagnostics, and every comment is still there (a comment inside a
declaration, or after a value, would be dropped). Otherwise ``Refused`` says why and the
document is left as it is.
"""

from __future__ import annotations

import re

from gitrefs.persist.errors import UserError
from iterion.dsl import Severity, load_source, parse
from iterion.dsl.canonical import canonical_encoding
from iterion.dsl.unparse import Unwritable, parts

_COMMENT = re.compile(r"##.*$")


class Refused(UserError):
    """The document cannot be formatted without changing it (the message says why)."""


def _comments(text: str) -> list[str]:
    return sorted(m.group().strip() for line in text.splitlines() for m in [_COMMENT.search(line)] if m)


def _codes(text: str, file: str) -> list[tuple[str, str]]:
    return sorted((d.code, d.severity.value) for d in load_source(text, file=file).diagnostics)


def _margin_comments(lines: list[str], start: int, stop: int) -> list[str]:
    """The comment lines at the left margin that end the range [start, stop) of 0-based lines,
    separated from what precedes them only by blank lines (what reads as a note above)."""
    out: list[str] = []
    i = stop - 1
    while i >= start and (lines[i].startswith("##") or not lines[i].strip()):
        if lines[i].startswith("##"):
            out.append(lines[i].rstrip())
        i -= 1
    return out[::-1]


def format_text(text: str, file: str) -> str:
    """``text`` as the canonical unparser writes it (margin comments kept), or ``Refused``."""
    tree, diags = parse(text, file)
    errors = [d for d in diags if d.severity is Severity.ERROR]
    if errors:
        raise Refused(f"not formatted: the file does not parse ({errors[0].code} at line {errors[0].span.line})")
    try:
        pieces = parts(tree)
    except Unwritable as exc:
        raise Refused(f"not formatted: {exc}") from None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    starts = [d.span.line - 1 for d in tree.decls]
    out: list[str] = []
    previous = 0
    for (sep, body), start in zip(pieces, starts, strict=True):
        notes = _margin_comments(lines, previous, start)
        out.append(sep + "".join(n + "\n" for n in notes) + body)
        previous = start + 1
    tail = _margin_comments(lines, previous, len(lines))
    formatted = "".join(out) + "\n" + ("\n" + "\n".join(tail) + "\n" if tail else "")
    if not tree.decls:
        formatted = "\n".join(tail) + "\n" if tail else ""
    _check_same(text, formatted, file)
    return formatted


def _check_same(text: str, out: str, file: str) -> None:
    if any(d.severity is Severity.ERROR for d in parse(out, file)[1]) or \
            canonical_encoding({"main.bot": out}, main="main.bot") != canonical_encoding({"main.bot": text}, main="main.bot"):
        raise Refused("not formatted: the canonical form would not read back as the same workflow")
    if _codes(out, file) != _codes(text, file):
        # e.g. a trailing comma the compiler refuses, or a repeated block it warns about: the
        # unparser's spelling would silence a diagnostic, which is not the same document
        raise Refused("not formatted: the canonical form would change what `iterion validate` reports; "
                      "fix the diagnostics first")
    lost = len(_comments(text)) - len(_comments(out))
    if lost > 0:
        raise Refused(f"not formatted: {lost} comment(s) inside a declaration or after a value would be lost; "
                      "move them to their own line above the declaration to format this file")
