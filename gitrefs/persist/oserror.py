"""Environment trouble the user fixes (a full or read-only disk, a permission, a path that cannot
exist) turned into one ``UserError`` line naming the path, instead of an internal error.

The CLI's last resort (cli/errors.py): commands check what they can up front (cli/preflight.py);
whatever an unforeseen write still meets is reported here the same way, exit 2.
"""

from __future__ import annotations

import errno

from gitrefs.persist.errors import UserError

_HINTS = {
    errno.ENOSPC: "free space on that disk, then retry",
    errno.EDQUOT: "free space within your quota, then retry",
    errno.EROFS: "remount it read-write (or use a writable directory), then retry",
    errno.EACCES: "fix its permissions (or use a directory you can write), then retry",
    errno.EPERM: "fix its permissions (or use a directory you can write), then retry",
    errno.ENAMETOOLONG: "use a shorter path or name",
    errno.ENOTDIR: "a component of that path is a file, not a directory: fix the path",
    # a directory (or a symlink loop) where a file belongs: a damaged store or a hand-made path
    errno.EISDIR: "a file belongs at that path: move the directory aside (or fix the path), then retry",
    errno.ELOOP: "that path is a symlink loop: fix the link, then retry",
    # mkdir over a file (a store subdirectory replaced by hand): the one EEXIST that reaches here
    errno.EEXIST: "something is already at that path (a file where a directory belongs?): move it aside, then retry",
}


def environment_error(exc: BaseException) -> UserError | None:
    """A one-line UserError (exit 2) for an environment OSError, else None."""
    if not isinstance(exc, OSError) or exc.errno not in _HINTS:
        return None
    name = exc.filename if isinstance(exc.filename, str) else None
    if name is not None and len(name) > 160:
        name = f"{name[:160]}... ({len(name)} characters)"
    where = f"{name}: " if name else ""
    text = f"{where}{exc.strerror or exc}".replace("\n", "\\n").replace("\r", "\\r")
    return UserError(text, hint=_HINTS[exc.errno])
