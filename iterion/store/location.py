"""Is a store directory usable? Checked where a command opens the store, before it changes anything.

``resolve_store_dir`` (layout.py) decides WHERE the store is; this module only refuses a path that
cannot be one: a regular file, a device such as ``/dev/null``, a path under a file, or (for a
command that writes) a read-only or permission-denied directory. Each refusal is one line naming
the path and the fix (exit 2), raised before anything is created.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from gitrefs.persist.inputs import file_kind
from gitrefs.persist.writable import unwritable_reason
from iterion.store.errors import StoreError, StoreFullError

STORE_HINT = "pass --store-dir a directory (or set $ITERION_STORE_DIR to one)"


class StoreLocationError(StoreError):
    """The store path cannot hold a store (exit 2: an environment problem the user fixes)."""


def _kind(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError:
        return "not a directory"
    return file_kind(mode) or "a regular file"


def check_store_dir(root: Path) -> Path:
    """``root`` if it is a directory or can be created as one; else StoreLocationError."""
    root = Path(root)
    if root.is_dir():
        return root
    if root.exists() or root.is_symlink():
        raise StoreLocationError(f"store directory {root} is {_kind(root)}, not a directory", hint=STORE_HINT)
    for parent in root.parents:
        if parent.is_dir():
            break
        if parent.exists():
            raise StoreLocationError(f"store directory {root} cannot be created: {parent} is {_kind(parent)}",
                                     hint=STORE_HINT)
    return root


def check_store_writable(root: Path, *dirs: Path) -> None:
    """Refuse (before any write) when the store, or one of ``dirs`` inside it, is read-only."""
    for d in (Path(root), *dirs):
        reason = unwritable_reason(d)
        if reason is not None:
            raise StoreLocationError(f"run store {root} cannot be written: {reason}",
                                     hint="remount it read-write or fix its permissions, or pass --store-dir "
                                          "a writable directory")


def check_store_space(directory: Path, needed: int) -> None:
    """Refuse (StoreFullError, exit 2) before any write when the store's disk has less than
    ``needed`` bytes free: a command that changes a run needs room for at least its run.json."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return
    if st.f_bavail * st.f_frsize < needed:
        raise StoreFullError.from_os_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory)),
                                           directory)
