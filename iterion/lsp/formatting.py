"""Formatting through the canonical unparser, only where the result is the same program.

The unparser drops comments and cannot spell every string; so a document is formatted only
when it parses without errors, its text unparses, the result parses back to the same
canonical encoding (what `rewind --auto` compares) with the same diagnostics, and no comment
would be lost. Otherwise
``Refused`` says why, and the document is left as it is.
"""

from __future__ import annotations

import re

from iterion.dsl import Severity, load_source, parse
from iterion.dsl.canonical import canonical_encoding
from iterion.dsl.unparse import Unwritable, unparse
from persist.errors import UserError

_COMMENT = re.compile(r"##.*$")


class Refused(UserError):
    """The document cannot be formatted without changing it (the message says why)."""


def _comments(text: str) -> list[str]:
    return sorted(m.group().strip() for line in text.splitlines() for m in [_COMMENT.search(line)] if m)


def _codes(text: str, file: str) -> list[tuple[str, str]]:
    return sorted((d.code, d.severity.value) for d in load_source(text, file=file).diagnostics)


def format_text(text: str, file: str) -> str:
    """``text`` as the canonical unparser writes it, or ``Refused``."""
    tree, diags = parse(text, file)
    errors = [d for d in diags if d.severity is Severity.ERROR]
    if errors:
        raise Refused(f"not formatted: the file does not parse ({errors[0].code} at line {errors[0].span.line})")
    try:
        out = unparse(tree)
    except Unwritable as exc:
        raise Refused(f"not formatted: {exc}") from None
    tree2, diags2 = parse(out, file)
    if any(d.severity is Severity.ERROR for d in diags2) or \
            canonical_encoding({"main.bot": out}, main="main.bot") != canonical_encoding({"main.bot": text}, main="main.bot"):
        raise Refused("not formatted: the canonical form would not read back as the same workflow")
    if _codes(out, file) != _codes(text, file):
        # e.g. a trailing comma the compiler refuses, or a repeated block it warns about: the
        # unparser's spelling would silence a diagnostic, which is not the same document
        raise Refused("not formatted: the canonical form would change what `iterion validate` reports; "
                      "fix the diagnostics first")
    lost = len(_comments(text)) - len(_comments(out))
    if lost > 0:
        raise Refused(f"not formatted: the formatter drops comments and this file has {lost} comment(s); "
                      "remove them (or keep formatting by hand) to format it")
    return out
