"""What differs between two manifests: the diff a caller shows, and the produced-scope input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from workspacetrack.models import Manifest

ChangeKind = Literal["added", "modified", "deleted", "mode_changed"]


@dataclass(frozen=True)
class Change:
    path: str
    kind: ChangeKind
    old_hash: str | None
    new_hash: str | None
    old_mode: int | None
    new_mode: int | None

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path, "kind": self.kind, "old_hash": self.old_hash, "new_hash": self.new_hash,
            "old_mode": None if self.old_mode is None else oct(self.old_mode),
            "new_mode": None if self.new_mode is None else oct(self.new_mode),
        }


def diff_manifests(a: Manifest, b: Manifest) -> list[Change]:
    """Captured-content changes from ``a`` to ``b``, sorted by path (skipped paths not included)."""
    out: list[Change] = []
    ea, eb = a.entries, b.entries
    for path in sorted(ea.keys() | eb.keys()):
        old, new = ea.get(path), eb.get(path)
        if old == new:
            continue
        if old is None:
            out.append(Change(path, "added", None, new[0], None, new[1]))  # type: ignore[index]
        elif new is None:
            out.append(Change(path, "deleted", old[0], None, old[1], None))
        elif old[0] == new[0] and old[1] != new[1]:
            out.append(Change(path, "mode_changed", old[0], new[0], old[1], new[1]))
        elif old[0] != new[0] or old[1] != new[1]:
            out.append(Change(path, "modified", old[0], new[0], old[1], new[1]))
    return out


def changed_paths(a: Manifest, b: Manifest) -> set[str]:
    """Paths whose recorded state differs, including a path becoming or ceasing to be skipped."""
    if a is b:
        return set()  # one state (the manifest cache hands out the same object for one digest)
    ea, eb = a.entries, b.entries
    paths = {p for p in ea.keys() | eb.keys() if _state(ea.get(p)) != _state(eb.get(p))}
    sa, sb = a.skipped, b.skipped
    paths |= {p for p in sa.keys() ^ sb.keys()}
    paths |= {p for p in sa.keys() & sb.keys() if sa[p] != sb[p]}
    return paths


def _state(e: tuple[str, int, int, str | None] | None) -> tuple[str, int] | None:
    """What makes two entries the same file: content and mode (size and target follow from hash)."""
    return None if e is None else (e[0], e[1])
