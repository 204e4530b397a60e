"""Which run and node ids can live inside a ref name.

One rule for every layer: an id is stored as exactly one ref component, so it must pass
`git check-ref-format` as a single component. The error names the offending character so the
user can fix the id rather than guess.
"""

from __future__ import annotations

from gitrefs.persist import UserError

# check-ref-format forbids these anywhere in a component; '/' would split the component.
_FORBIDDEN = {" ": "space", "~": "'~'", "^": "'^'", ":": "':'", "?": "'?'", "*": "'*'",
              "[": "'['", "\\": "backslash", "/": "'/'"}


class InvalidIdError(UserError, ValueError):
    """An id that git cannot store as one ref component."""


def validate_id(value: str, what: str = "id") -> str:
    """Return ``value`` unchanged if it is usable as one ref component, else raise InvalidIdError."""
    if not isinstance(value, str) or value == "":
        raise InvalidIdError(f"{what} is empty; give a non-empty name")
    for ch in value:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            raise InvalidIdError(f"{what} {value!r} contains control character {ch!r}; use letters, digits, '-', '_' or '.'")
        if ch in _FORBIDDEN:
            raise InvalidIdError(f"{what} {value!r} contains {_FORBIDDEN[ch]}, which git refuses in a ref name; use letters, digits, '-', '_' or '.'")
    if value.startswith("."):
        raise InvalidIdError(f"{what} {value!r} starts with '.', which git refuses in a ref name")
    if value.endswith("."):
        raise InvalidIdError(f"{what} {value!r} ends with '.', which git refuses in a ref name")
    if value.endswith(".lock"):
        raise InvalidIdError(f"{what} {value!r} ends with '.lock', which git refuses in a ref name")
    if ".." in value:
        raise InvalidIdError(f"{what} {value!r} contains '..', which git refuses in a ref name")
    if "@{" in value:
        raise InvalidIdError(f"{what} {value!r} contains '@{{', which git refuses in a ref name")
    if value == "@":
        raise InvalidIdError(f"{what} '@' alone is not a valid ref name")
    return value
