"""Run references: a full id, a unique id prefix of at least ``MIN_PREFIX`` characters, or a
friendly name; and the shortest prefix that tells each id apart (what listings highlight).

Ids are time-ordered, so runs launched minutes apart share their first 7-10 characters: the
shortest unique prefix of each is computed against its sorted neighbours (one pass, no quadratic
scan). A shown prefix is never shorter than ``MIN_PREFIX``, so every prefix a listing shows is also
one ``match_ref`` accepts.
"""

from __future__ import annotations

from collections.abc import Sequence

MIN_PREFIX = 4


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def unique_prefix_lengths(ids: Sequence[str]) -> dict[str, int]:
    """id -> length of its shortest prefix no other id shares (at least MIN_PREFIX, at most len(id))."""
    ordered = sorted(set(ids))
    out: dict[str, int] = {}
    for i, rid in enumerate(ordered):
        shared = max(_common(rid, ordered[i - 1]) if i > 0 else 0,
                     _common(rid, ordered[i + 1]) if i + 1 < len(ordered) else 0)
        out[rid] = min(len(rid), max(MIN_PREFIX, shared + 1))
    return out


def short_ids(ids: Sequence[str]) -> dict[str, str]:
    """id -> its shortest unique prefix (see ``unique_prefix_lengths``)."""
    return {rid: rid[:n] for rid, n in unique_prefix_lengths(ids).items()}


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``, ... : the first one not in ``taken``."""
    if name not in taken:
        return name
    n = 2
    while f"{name}-{n}" in taken:
        n += 1
    return f"{name}-{n}"
