"""Can this process create files under a directory? Asked before a command changes anything.

``os.access`` answers for the caller's own identity (root passes permission bits but not a
read-only mount, which reports EROFS), so the probe has no side effect: nothing is created.
"""

from __future__ import annotations

import os
from pathlib import Path


def nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists, else its nearest existing ancestor."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or "/")


def is_read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def unwritable_reason(directory: Path) -> str | None:
    """Why files cannot be created in ``directory`` (or where it would be created), else None."""
    target = nearest_existing(Path(directory))
    if is_read_only_fs(target):
        return f"{target} is on a read-only filesystem"
    if not os.access(target, os.W_OK | os.X_OK):
        return f"{target} is not writable (permission denied)"
    return None
