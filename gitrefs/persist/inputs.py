"""Bounded reading of the files a user hands us: the one home every reader goes through.

Workflow sources (main files, ``import`` fragments, ``{{include}}`` files, bundle members),
answers files and script files must be regular files of a bounded size. A FIFO or a device
(``/dev/zero``, a ``mkfifo``) is refused at once, never waited on or read forever; a file over
its kind's limit is refused with its size and the limit, never read into memory.

How: ``stat`` first (a FIFO is refused before it is ever opened); then ``open`` with
``O_NONBLOCK`` (a FIFO swapped in since the ``stat`` cannot block the open) and ``fstat`` on
the descriptor, which is what is read (a file swapped since the ``stat`` is judged again);
then at most ``limit + 1`` bytes are read, so a file that grows while read is refused too.
Nothing is written: a refusal leaves every store and workspace as it was.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gitrefs.persist.errors import UserError

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limit:
    """A size limit in bytes, overridable by the environment variable ``env`` (a byte count)."""

    kind: str          # what the limit is for, as messages name it ("an answers file")
    env: str
    default: int
    # The fix to suggest when the default (not a user's own setting) refused a file; None: raise it.
    over_default_hint: str | None = None

    def hint(self) -> str:
        if self.over_default_hint is not None and self.env not in os.environ:
            return self.over_default_hint
        return f"set {self.env} (bytes) to raise the limit if this file is really meant"

    def bytes(self) -> int:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        if raw.isascii() and raw.isdigit() and int(raw) > 0:
            return int(raw)
        # never silently the default: the refusal would then tell the user to set what they set
        raise UserError(f"${self.env}={raw!r} is not a positive whole number of bytes",
                        hint=f"set it to a byte count (e.g. {self.env}={self.default}), or unset it")


# Workflow sources, import fragments, include files, bundle members, script-backend files.
# Its default is above the language's own 10 MiB (docs/language.md §1), which the parser
# enforces as P008: past the default, the fix is the language's, not raising this guard.
SOURCE_LIMIT = Limit("a workflow source", "ITERION_MAX_SOURCE_BYTES", 16 * MiB,
                     "a workflow source may hold at most 10 MiB: split it, "
                     "import \"lib/part.bot\" adds another file's declarations")
# A packed bundle (.botz): its skills and attachments may be binary; unpacked it is capped
# separately (iterion.dsl.sources.MAX_ARCHIVE_BYTES).
ARCHIVE_LIMIT = Limit("a .botz archive", "ITERION_MAX_ARCHIVE_BYTES", 64 * MiB)
# Human answers: a few MiB is far beyond any form a person fills in.
ANSWERS_LIMIT = Limit("an answers file", "ITERION_MAX_ANSWERS_BYTES", 4 * MiB)


class InputFileError(UserError):
    """A named input file that is not a regular file, or is too big (exit 2, one line)."""

    def __init__(self, message: str, *, path: str, reason: str, hint: str | None = None,
                 over: Limit | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path
        self.reason = reason  # the message without the "<what> <path>" prefix (for diagnostics)
        self.over = over  # the limit the file is over (None: refused for its type or a read error)


def file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file): the one wording every
    refusal of a path by its type uses."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB ({n} bytes)" if n >= MiB else f"{n} bytes"


def _refuse(what: str, path: Path, reason: str, hint: str | None, over: Limit | None = None) -> InputFileError:
    return InputFileError(f"{what} {path} {reason}", path=str(path), reason=reason, hint=hint, over=over)


def _check_mode(what: str, path: Path, mode: int) -> None:
    kind = file_kind(mode)
    if kind is not None:
        reason = f"is {kind}, not a regular file" if kind != "not a regular file" else "is not a regular file"
        raise _refuse(what, path, reason, "give the path of a regular file")


def _check_size(what: str, path: Path, size: int, limit: Limit) -> None:
    cap = limit.bytes()
    if size > cap:
        raise _refuse(what, path, f"is {_size(size)}, over the {_size(cap)} limit for {limit.kind} ({limit.env})",
                      limit.hint(), limit)


def check_regular_file(path: str | os.PathLike[str], what: str, limit: Limit) -> None:
    """Refuse ``path`` unless it is a regular file within ``limit`` (a missing file passes:
    the caller reports it in its own words). Follows symlinks, as opening does."""
    p = Path(path)
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise _refuse(what, p, f"cannot be read: {exc.strerror or exc}", None) from None
    _check_mode(what, p, st.st_mode)
    _check_size(what, p, st.st_size, limit)


def read_bounded(path: str | os.PathLike[str], what: str, limit: Limit) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises InputFileError for a non-regular or oversized file; FileNotFoundError and other
    OSErrors of opening or reading pass through for the caller to word.
    """
    p = Path(path)
    check_regular_file(p, what, limit)  # a FIFO is refused before it is opened
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)  # what we actually opened: it may have been swapped since the stat
        _check_mode(what, p, st.st_mode)
        _check_size(what, p, st.st_size, limit)
        cap = limit.bytes()
        chunks: list[bytes] = []
        got = 0
        while got <= cap:
            chunk = os.read(fd, min(1 * MiB, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > cap:  # it grew while we read it
            _check_size(what, p, got, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_bounded(path: str | os.PathLike[str], what: str, limit: Limit) -> str:
    """``read_bounded`` decoded as UTF-8 (UnicodeDecodeError passes through)."""
    return read_bounded(path, what, limit).decode("utf-8")
