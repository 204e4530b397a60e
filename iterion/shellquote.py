"""How a value substituted into a tool's `command:` or `script:` is written (docs/language.md 5).

The one home of the quoting rule; ``iterion.templates.render`` calls it for every marker.

In a shell text (a `command:`, and a `script:` in ``sh``/``bash``, which is shell text too):

- a string becomes one single-quoted shell word, each embedded ``'`` written ``'\\''``
  (``it's`` -> ``'it'\\''s'``); numbers and booleans likewise (``'3'``, ``'true'``);
- a list of scalars becomes its items, each quoted, separated by spaces (empty list: nothing);
  a map, or a list holding maps or lists, becomes its JSON text quoted as one word;
- a null value leaves the ``{{...}}`` marker in place (``None`` from here);
- ``{{!ref}}`` inserts the value unquoted: strings verbatim, other values as JSON.

In a program text (a `script:` in ``python`` or ``node``) a value is a JSON literal
(``"text"``, ``3``, ``["a"]``, ``null``); ``{{!ref}}`` inserts raw text.

Why `sh`/`bash` scripts take shell words and not JSON literals: a JSON string is a
double-quoted shell word, inside which ``$(...)`` and backticks still run. The JSON
rule is kept where it is safe (python, node), replaced by the command rule where it is not (docs/language.md 10).

A single-quoted shell word is inert: inside ``'...'`` the shell interprets nothing, so the
command receives the value's exact text. The one value no shell word can carry is a NUL byte
(argv and environment strings end at it): such a value is refused (``UnquotableValue``), never
truncated.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from iterion.expr import to_text

# how a template's values are written: prompts and messages ("text"), `with` values ("with"),
# shell text ("shell": `command:`, sh/bash `script:`), program text ("program": python/node)
RenderMode = Literal["text", "with", "shell", "program"]

SHELL_SCRIPT_LANGUAGES = frozenset({"sh", "bash"})


class UnquotableValue(ValueError):
    """A value that cannot be written safely (a NUL byte in shell text, a non-finite number)."""


def script_mode(language: str | None) -> RenderMode:
    """The rule a `script:` body of ``language`` follows: shell words for sh/bash, else JSON."""
    return "shell" if (language or "sh").lower() in SHELL_SCRIPT_LANGUAGES else "program"


def shell_text(text: str) -> str:
    """``text`` if a command can receive it as is; else UnquotableValue (a NUL byte, or a lone
    UTF-16 surrogate that has no bytes)."""
    if "\x00" in text:
        raise UnquotableValue("the value contains a NUL byte, which no shell command can carry")
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise UnquotableValue("the value contains a lone UTF-16 surrogate, which is not text a command "
                              "can receive") from None
    return text


def quote_word(text: str) -> str:
    """``text`` as one shell word the shell reads back exactly: ``'...'`` with ``'`` as ``'\\''``."""
    return "'" + shell_text(text).replace("'", "'\\''") + "'"


_PLAIN_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


def printed_word(text: str) -> str:
    """``text`` as a shell word in a command printed for a person to paste: as is when no shell
    reads anything into it (``--run-id``, ``approved=true``, ``/tmp/x.bot``), else ``quote_word``."""
    if text and all(c in _PLAIN_WORD for c in text):
        return text
    return quote_word(text)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def shell_value(value: Any) -> str | None:
    """``value`` written for shell text; None for a null value (the marker stays in place)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and all(_is_scalar(item) for item in value):
        return " ".join(quote_word(to_text(item)) for item in value)
    return quote_word(to_text(value))


def json_literal(value: Any) -> str:
    """``value`` as a JSON literal for a python/node program (``null`` for a null value)."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        raise UnquotableValue("the value holds a number that is not finite (NaN or infinity), "
                              "which has no JSON literal") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: keep it as an escape, the file stays UTF-8
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False, default=str)
    return text


def raw_value(value: Any) -> str:
    """``{{!ref}}``: strings verbatim, other values as JSON."""
    return to_text(value)


def substitute(value: Any, mode: RenderMode, raw: bool) -> str | None:
    """What replaces a marker whose reference resolved to ``value``; None keeps the marker.

    ``text`` (prompts) and ``with`` get the plain rendering; in ``text`` a raw marker stays as
    written (docs/language.md 5), in ``with`` the ``!`` has no effect.
    """
    if mode == "text":
        return None if raw else to_text(value)
    if mode == "with":
        return to_text(value)
    if mode == "shell":
        if value is None:
            return None
        if raw:
            return shell_text(raw_value(value))
        return shell_value(value)
    return raw_value(value) if raw else json_literal(value)
