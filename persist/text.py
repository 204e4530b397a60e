"""Text made safe for one line of a message.

Names a user gives (file names, run references) may hold newlines, escape sequences or bytes that
are not UTF-8 (surrogate-escaped by the OS layer). Printed raw they would split a one-line message
such as a ``file:line:col:`` diagnostic, or drive the terminal; escaped, the line stays one line and
still names the thing exactly.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with each non-printable character (control characters, lone surrogates) written as
    its Python escape (``\\n``, ``\\x1b``, ``\\udcff``); printable text, spaces included, unchanged."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
