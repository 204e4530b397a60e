"""Large files: streamed in chunks, never read whole into memory, holes kept as holes.

A file's content id is the blake3 of its bytes, whatever their layout on disk. A hole reads as
zeros, so its part of the hash is fed from a zero buffer (no read); only the data extents
(``SEEK_DATA``/``SEEK_HOLE``) are read and written. The stored object is a byte-identical
copy of the file, written sparse: a 1 GB file holding a few megabytes of data costs a few
megabytes in the store, and is restored sparse the same way. Where the platform cannot report
extents, the whole file is one data extent (read fully; still streamed).

The size limit a capture applies is ``ITERION_TRACK_MAX_FILE_SIZE`` (bytes, or with a K/M/G/T
suffix, powers of 1024); a file larger than it is not captured, and is reported (the
``workspace_capture_skipped`` event at capture, ``files.skipped`` at rewind).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Protocol

import blake3

from workspacetrack.errors import TrackError

SIZE_CAP_ENV = "ITERION_TRACK_MAX_FILE_SIZE"
DEFAULT_SIZE_CAP = 2 * 2**30  # 2 GiB: no source, asset or data file a user edits meets it by accident
STREAM_MIN = 8 * 2**20  # files from this size on are streamed (below: read in one piece, faster)
CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def size_cap_from_env() -> int:
    """The capture size limit: ``$ITERION_TRACK_MAX_FILE_SIZE`` if set, else 2 GiB."""
    raw = os.environ.get(SIZE_CAP_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_SIZE_CAP
    m = _SIZE.match(raw)
    if m is None:
        raise TrackError(f"{SIZE_CAP_ENV}={raw!r} is not a size",
                         hint=f"give bytes, or a number with K, M, G or T (e.g. {SIZE_CAP_ENV}=4G)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def human_size(n: int) -> str:
    for unit, div in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def extents(fd: int, size: int) -> Iterator[tuple[int, int, bool]]:
    """(offset, length, is_data) runs covering [0, size): data extents and holes, in order."""
    pos = 0
    while pos < size:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == 6:  # ENXIO: no data past pos, the rest is a hole
                yield pos, size - pos, False
                return
            yield pos, size - pos, True  # no extent support here: all data
            return
        data = min(data, size)
        if data > pos:
            yield pos, data - pos, False
        if data >= size:
            return
        try:
            hole = min(os.lseek(fd, data, os.SEEK_HOLE), size)
        except OSError:
            hole = size
        yield data, hole - data, True
        pos = hole


def hasher() -> blake3.blake3:
    return blake3.blake3(max_threads=blake3.blake3.AUTO)


class Hasher(Protocol):
    def update(self, data: bytes, /) -> object: ...

    def hexdigest(self) -> str: ...


def copy_sparse(src: int, dst: int | None, size: int, h: Hasher | None) -> int:
    """Copy ``size`` bytes from ``src`` to ``dst`` (None: hash only), holes as holes; returns
    the bytes actually read. ``dst`` ends truncated to exactly the bytes copied."""
    done = 0
    for off, length, is_data in extents(src, size):
        if not is_data:
            if h is not None:
                left = length
                while left:
                    n = min(left, CHUNK)
                    h.update(_ZEROS[:n] if n < CHUNK else _ZEROS)
                    left -= n
            done = off + length
            continue
        pos, end = off, off + length
        while pos < end:
            chunk = os.pread(src, min(CHUNK, end - pos), pos)
            if not chunk:
                end = pos  # the file shrank while being read
                break
            if h is not None:
                h.update(chunk)
            if dst is not None:
                view = memoryview(chunk)
                at = pos
                while view:
                    n = os.pwrite(dst, view, at)
                    view, at = view[n:], at + n
            pos += len(chunk)
        done = pos
        if pos < off + length:
            break
    if dst is not None:
        os.ftruncate(dst, done)
    return done
