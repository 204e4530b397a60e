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


def require_utf8_path(path: str, what: str) -> None:
    """Refuse (UserError, exit 2) a path holding bytes that are not UTF-8: run documents record
    paths as UTF-8 JSON text, so such a run could be neither recorded nor resumed."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        from gitrefs.persist.errors import UserError

        raise UserError(f"{what} {one_line(path)} has a name that is not UTF-8 text, which a run cannot record",
                        hint="rename it (or a parent directory) to a UTF-8 name, then retry") from None
