"""The Linux inotify system calls, through ctypes on the C library: init, add/remove a watch,
and the event records of a read buffer.

Our own few lines rather than a dependency's private binding (watchdog's ``inotify_c`` is not a
public API and moved between releases; issue 32). Only what the change journal needs: the
journal reads the descriptor itself, synchronously (see journal.py for why).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
from collections.abc import Iterator

IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name


class _Libc:
    def __init__(self) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.init1 = lib.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.init1.restype = ctypes.c_int
        self.add_watch = lib.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = lib.inotify_rm_watch
        self.rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        self.rm_watch.restype = ctypes.c_int


_libc: _Libc | None = None


def available() -> bool:
    """Whether this process can use inotify (Linux, a C library that has the calls)."""
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            _libc = _Libc()
        except (OSError, AttributeError):
            return False
    return _libc is not None


def init(flags: int = IN_NONBLOCK | IN_CLOEXEC) -> int:
    """A new inotify descriptor (non-blocking, close-on-exec); raises OSError on failure."""
    assert available(), "inotify is not available on this system"
    fd = _libc.init1(flags)  # type: ignore[union-attr]
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(fd)


def add_watch(fd: int, path: bytes, mask: int) -> int:
    """The watch descriptor for ``path``, or -1 with the reason in ``last_errno()``."""
    return int(_libc.add_watch(fd, path, mask))  # type: ignore[union-attr]


def rm_watch(fd: int, wd: int) -> None:
    _libc.rm_watch(fd, wd)  # type: ignore[union-attr]


def last_errno() -> int:
    return ctypes.get_errno()


def parse_events(buf: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """Each event record in ``buf`` as (wd, mask, cookie, name); the name without its NUL padding."""
    pos, end, size = 0, len(buf), _EVENT.size
    while pos + size <= end:
        wd, mask, cookie, length = _EVENT.unpack_from(buf, pos)
        pos += size
        name = buf[pos:pos + length].rstrip(b"\0")
        pos += length
        yield wd, mask, cookie, name
