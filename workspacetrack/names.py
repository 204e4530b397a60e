"""File names as the tracker holds them: in memory, on disk (JSON), and in a report.

In memory a path is Python's ``str`` of its bytes (``surrogateescape``: a byte that is not
UTF-8 becomes a lone surrogate), which ``os`` functions turn back into the exact bytes. JSON
through pydantic cannot carry a lone surrogate, so a persisted document stores such a string
in its *wire* form: ``"\\x00"`` followed by the hex of its bytes. A real path, link target or
rule text never contains NUL, so the form is unambiguous, and a document written before the
form existed (no name starts with NUL) reads unchanged.

Reports (CLI text, ``--json``, the ``run_rewound`` event) show such a path in its *display*
form, bytes that are not UTF-8 as ``\\xNN``; ``raw_path`` gives the exact bytes (hex) beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from gitrefs.persist.text import one_line

_WIRE = "\x00"
V = TypeVar("V")


def is_clean(s: str) -> bool:
    """Whether ``s`` is plain UTF-8 text (no lone surrogate): JSON can carry it as it is."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def all_clean(items: Iterable[str]) -> bool:
    """``is_clean`` of every item, in one pass over their concatenation (a 100,000-path
    manifest is checked at C speed; a lone surrogate stays one in the concatenation)."""
    return is_clean("".join(items))


def any_wire(items: Iterable[str]) -> bool:
    """Whether some item is in wire form: a real name never contains NUL, so one NUL anywhere
    in the concatenation means one of them starts with the wire marker."""
    return _WIRE in "".join(items)


def to_bytes(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def from_bytes(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def to_wire(s: str) -> str:
    return s if is_clean(s) else _WIRE + to_bytes(s).hex()


def from_wire(s: str) -> str:
    return from_bytes(bytes.fromhex(s[1:])) if s[:1] == _WIRE else s


def keys_to_wire(d: dict[str, V]) -> dict[str, V]:
    """``d`` with its unclean keys in wire form (``d`` itself when every key is clean)."""
    if all(k.isascii() or is_clean(k) for k in d):
        return d
    return {to_wire(k): v for k, v in d.items()}


def keys_from_wire(d: dict[str, V]) -> dict[str, V]:
    if not any(k[:1] == _WIRE for k in d):
        return d
    return {from_wire(k): v for k, v in d.items()}


def list_to_wire(items: Iterable[str]) -> list[str]:
    return [to_wire(s) for s in items]


def list_from_wire(items: Iterable[str]) -> list[str]:
    return [from_wire(s) for s in items]


def display(s: str) -> str:
    """``s`` as one printable line of UTF-8: bytes that are not UTF-8 shown as ``\\xNN``, and
    control characters (a newline in a file name, an escape sequence) escaped as
    ``gitrefs.persist.text.one_line`` does, so a listing keeps one path per line."""
    return one_line(s if is_clean(s) else to_bytes(s).decode("utf-8", "backslashreplace"))


def raw_paths(paths: Iterable[str]) -> dict[str, str]:
    """display form -> hex of the exact bytes, for the paths whose display form is not exact."""
    return {display(p): to_bytes(p).hex() for p in paths if not is_clean(p)}


def mapping_to_wire(d: Mapping[str, str]) -> dict[str, str]:
    """Keys and values in wire form (a map of path -> text, e.g. rule files)."""
    return {to_wire(k): to_wire(v) for k, v in d.items()}


def mapping_from_wire(d: Mapping[str, str]) -> dict[str, str]:
    return {from_wire(k): from_wire(v) for k, v in d.items()}
