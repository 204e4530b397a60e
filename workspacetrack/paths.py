"""Workspace-relative paths as the tracker stores them: '/'-separated, never absolute, no '..'.

A backslash is an ordinary byte of a POSIX file name (not a separator): allowed.

Paths only ever enter a manifest from directory listings, so a bad one means a tampered or
corrupt store; restore re-checks every path here before touching the disk.
"""

from __future__ import annotations

from workspacetrack.errors import CorruptStoreError


def check_relpath(path: str) -> str:
    """Return ``path`` if it is a clean workspace-relative path, else raise CorruptStoreError."""
    if not path or path.startswith("/") or "\x00" in path:
        raise CorruptStoreError(f"refusing path {path!r}: not a clean workspace-relative path")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise CorruptStoreError(f"refusing path {path!r}: empty, '.' or '..' component")
    return path


def parent_dirs(path: str) -> list[str]:
    """Ancestor directories of ``path``, outermost first ('a/b/c' -> ['a', 'a/b'])."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]

