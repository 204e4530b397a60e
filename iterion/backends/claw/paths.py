"""What a path argument of the claw file tools really names, and whether it is protected.

One rule for every path argument (docs/technical/permissions.md): the path is resolved
(symlinks, ``..``, absolute) to a canonical path relative to the workspace BEFORE any permission
rule is evaluated; the rules match that path; a path that lands outside the workspace is refused
before any rule. Then the protected defaults: any repository's git dir (``.git/``, a worktree or
bare git dir found by its contents), the run store (``.iterion/`` and wherever the store is), a
write to a file with more than one hard link; and a device, FIFO or socket is never opened.

The check is made again on what was really opened (``open_checked``): the parent directory is
opened without following a final symlink, its fd's path compared with the resolved one, and the
file opened relative to it with ``O_NOFOLLOW | O_NONBLOCK``, so a symlink swapped in after the
decision, or a FIFO, can neither redirect nor block the call.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from iterion.store.layout import STORE_DIR_NAME

STORE_NAMES = frozenset({STORE_DIR_NAME})  # the default store's directory name, anywhere in the tree
GIT_NAME = ".git"


class PathRefused(Exception):
    """A path refused before any rule (outside the workspace, a special file); the message is
    the model's to read."""


@dataclass(frozen=True)
class Resolved:
    requested: str
    real: Path
    rel: str               # canonical, relative to the workspace ("." for the root)
    protected: str | None  # why the protected defaults cover it, or None


def special_kind(mode: int) -> str | None:
    """``a FIFO`` / ``a device`` / ``a socket`` for what must never be opened, else None."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def is_git_dir(d: Path) -> bool:
    """A git dir by its contents: bare repositories, a submodule's or a worktree's git dir under
    any name (a worktree's has ``commondir``; any has ``HEAD`` and ``objects``/``refs``)."""
    try:
        if not (d / "HEAD").is_file():
            return False
        return (d / "commondir").is_file() or ((d / "objects").is_dir() and (d / "refs").is_dir())
    except OSError:
        return False


class Resolver:
    def __init__(self, root: Path, protected_dirs: tuple[Path, ...] = ()) -> None:
        self.root = Path(os.path.realpath(root))
        # the store (and anything else the host names), as real paths; only those inside the
        # workspace matter (a worktree run's workspace is itself under <store>/worktrees/)
        real_dirs = (Path(os.path.realpath(p)) for p in protected_dirs)
        self.protected_dirs = tuple(d for d in real_dirs if self.root in d.parents)

    def inside(self, real: Path) -> bool:
        return real == self.root or self.root in real.parents

    def rel(self, real: Path) -> str:
        return "." if real == self.root else real.relative_to(self.root).as_posix()

    def resolve(self, raw: object, *, what: str = "path", write: bool = False) -> Resolved:
        if not isinstance(raw, str) or raw == "":
            raise PathRefused(f"{what} must be a non-empty string")
        if "\x00" in raw:
            raise PathRefused(f"{what} contains a NUL byte")
        p = Path(raw)
        full = p if p.is_absolute() else self.root / p
        real = Path(os.path.realpath(full))
        if not self.inside(real):
            why = " (through a symlink)" if Path(os.path.abspath(full)).is_relative_to(self.root) else ""
            raise PathRefused(f"{raw!r} is outside the workspace{why}; only paths under {self.root} are allowed")
        try:
            st: os.stat_result | None = os.lstat(real)
        except OSError:
            st = None
        if st is not None and (kind := special_kind(st.st_mode)) is not None:
            raise PathRefused(f"{raw!r} is {kind}, which the agent's file tools never open")
        return Resolved(raw, real, self.rel(real), self.protection(real, st if write else None))

    def protection(self, real: Path, write_stat: os.stat_result | None = None) -> str | None:
        """Why ``real`` (inside the workspace) is protected by default, or None. ``write_stat``:
        the target's lstat when the call writes (a hard-linked file is protected for writes)."""
        for d in self.protected_dirs:
            if real == d or d in real.parents:
                return "inside the run store"
        rel = real.relative_to(self.root).parts if real != self.root else ()
        cur = self.root
        for part in rel:
            cur = cur / part
            if part == GIT_NAME:
                return "inside a git dir, .git/"
            if part in STORE_NAMES:
                return f"inside the run store, {STORE_DIR_NAME}/"
            if is_git_dir(cur):
                return f"inside a git dir, {self.rel(cur)}/"
        if write_stat is not None and stat.S_ISREG(write_stat.st_mode) and write_stat.st_nlink > 1:
            return f"a file with {write_stat.st_nlink} hard links (a write would change the other names too)"
        return None

    def hidden(self, path: Path, is_dir: bool) -> bool:
        """Whether a walk (grep, glob, list_dir) skips an entry silently: protected names and dirs."""
        name = path.name
        if name == GIT_NAME or name in STORE_NAMES:
            return True
        if is_dir and (is_git_dir(path) or any(path == d for d in self.protected_dirs)):
            return True
        return False

    def walk(self, base: Path, tick: Callable[[], None]) -> Iterator[tuple[Path, os.DirEntry[str]]]:
        """Entries under ``base`` (depth first, sorted), never following a symlink and never
        entering a hidden directory; ``tick`` is called per entry (a deadline raises there)."""
        stack = [base]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for e in entries:
                tick()
                p = Path(e.path)
                is_dir = e.is_dir(follow_symlinks=False)
                if self.hidden(p, is_dir):
                    continue
                yield p, e
                if is_dir:
                    subdirs.append(p)
            stack.extend(reversed(subdirs))


def open_checked(res: Resolved, flags: int, mode: int = 0o666) -> int:
    """An fd on ``res.real`` opened without following a symlink anywhere after the decision:
    the parent is opened ``O_DIRECTORY | O_NOFOLLOW`` and must still be the resolved directory
    (its /proc/self/fd link, or its device and inode), the final component ``O_NOFOLLOW |
    O_NONBLOCK`` relative to it, and must be a regular file. Raises PathRefused or OSError."""
    parent = res.real.parent if res.real.name else res.real
    try:
        pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # the directory became a symlink
            raise PathRefused(f"{res.requested!r} changed while it was being opened (a symlink was swapped in)"
                              ) from None
        raise
    try:
        if not _same_dir(pfd, parent):
            raise PathRefused(f"{res.requested!r} changed while it was being opened (a symlink was swapped in)")
        fd = os.open(res.real.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=pfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the final component became a symlink
            raise PathRefused(f"{res.requested!r} became a symlink while it was being opened") from None
        raise
    finally:
        os.close(pfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = special_kind(st.st_mode) or "not a regular file"
        raise PathRefused(f"{res.requested!r} is {kind}, which the agent's file tools never open")
    os.set_blocking(fd, True)
    return fd


def _same_dir(fd: int, expected: Path) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == str(expected)
    except OSError:  # no /proc: compare the identity of what was opened with the path's
        a, b = os.fstat(fd), os.stat(expected)
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
