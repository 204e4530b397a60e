"""The placeholder a printed ``answer with:`` command puts in each field, and its refusal.

A printed command must never answer for the person: pasted unchanged it would approve (an
example ``approved=true``) without anyone deciding. So each field is printed with a placeholder
naming what to type (``approved='<true|false>'``, ``level='<low|high>'``, ``note='<text>'``),
and an answer equal to its field's placeholder is refused (exit 2) by ``coerce_value``, on
every path an answer takes (`resume --answer`, an answers file, the server's resume).

The one home of that rule: cli/parked.py prints ``placeholder(...)``, the engine refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence

# what a permission pause is answered with (`--answer approve=yes|no`, iterion/backends/claw/loop.py)
PERMISSION_FIELD = "approve"
PERMISSION_PLACEHOLDER = "<yes|no>"

_BY_TYPE = {
    "bool": "<true|false>",
    "int": "<int>",
    "float": "<number>",
    "string[]": "<a,b,...>",
    "json": "<json>",
    "file": "<@path>",
}


def placeholder(kind: str | None, enum: Sequence[object] | None = None) -> str:
    """``<true|false>`` for a bool, ``<low|high>`` for an enum, ``<text>`` for a string..."""
    if enum:
        return "<" + "|".join(map(str, enum)) + ">"
    return _BY_TYPE.get(str(kind or "string"), "<text>")


def is_placeholder(value: object, kind: str | None, enum: Sequence[object] | None = None) -> bool:
    """Whether ``value`` is the printed placeholder of a field of this type, pasted unchanged."""
    return isinstance(value, str) and value.strip() == placeholder(kind, enum)


def refusal(name: str, value: str) -> str:
    """The one-line refusal of a pasted placeholder."""
    return (f"answer {name}={value} is the placeholder of the printed command, not an answer: "
            f"replace {value} with your answer")
