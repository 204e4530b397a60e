"""The one way the CLI prints: user text is written as it is (no Rich markup, no emoji codes).

Every command prints through this module so that a node name, an instruction, a path or a stderr
line reaches the terminal byte-for-byte: nothing in user or model text is interpreted. Colour is
optional decoration put AROUND literal text (``styled``), only on a terminal and only when
``NO_COLOR`` is unset; it never changes the characters of the text itself.

The display never stops a run. ``guard_std_streams`` (called once by ``cli.main``) puts stdout
and stderr on writers that turn a reader that went away (EPIPE from ``| head``, EIO from a closed
terminal, ENOSPC of a redirect) into a sink: the first failed write points that descriptor at
/dev/null and everything after it, from this module, from ``print`` in the engine, from the
interpreter's final flush, is discarded silently. So ``iterion run x.bot | head -3`` runs on to
its real end, records its real status and exits with its documented code, and shutdown prints no
"Exception ignored ... BrokenPipeError". A descriptor 0/1/2 that is closed at start is opened on
/dev/null (as git does), so no file the run opens can land on it.

``tests/cli/test_output_guard.py`` keeps it the only printer: no other module of the project
imports rich or calls ``typer.echo``/``click.echo``/``print`` itself.
"""

from __future__ import annotations

import io
import json
import os
import select
import sys
import unicodedata
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple, TextIO

# -- styles: ANSI SGR codes, applied around literal text ------------------------------------------
_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


class Styled(NamedTuple):  # (not a dataclass: `iterion --version` must not import dataclasses/inspect)
    """``text`` shown in ``style`` (one of bold, dim, red, green, yellow, cyan) where colour is on."""

    text: str
    style: str


def styled(text: object, style: str) -> Styled:
    if style not in _SGR:
        raise ValueError(f"unknown style {style!r}")
    return Styled(str(text), style)


Part = str | Styled


def colour_enabled(stream: TextIO | None) -> bool:
    """Colour only on a terminal, never with ``NO_COLOR`` set (https://no-color.org) or TERM=dumb."""
    if stream is None or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


def render(parts: Sequence[Part], colour: bool) -> str:
    """The parts joined; a ``Styled`` part wrapped in its SGR code when ``colour``, else bare."""
    out = []
    for part in parts:
        if isinstance(part, Styled):
            out.append(f"\x1b[{_SGR[part.style]}m{part.text}\x1b[0m" if colour else part.text)
        else:
            out.append(part)
    return "".join(out)


# -- writing ---------------------------------------------------------------------------------------
_gone: weakref.WeakSet[TextIO] = weakref.WeakSet()  # streams whose reader went away (in-process
# runners such as CliRunner swap streams per call, so this is per stream, not per process)


def _write(stream: TextIO | None, parts: Sequence[Part], nl: bool) -> None:
    if stream is None or stream in _gone:
        return
    text = render(parts, colour_enabled(stream)) + ("\n" if nl else "")
    try:
        stream.write(text)
        stream.flush()
    except OSError:  # the reader is gone (unguarded stream, e.g. in-process tests): stop writing
        _gone.add(stream)


def echo(*parts: Part, nl: bool = True) -> None:
    """One line (or block) on stdout, printed literally; ``Styled`` parts coloured on a terminal."""
    _write(sys.stdout, parts, nl)


def echo_err(*parts: Part, nl: bool = True) -> None:
    """One line (or block) on stderr, printed literally; ``Styled`` parts coloured on a terminal."""
    _write(sys.stderr, parts, nl)


def echo_bytes(data: bytes) -> None:
    """``data`` on stdout exactly as it is (an artifact or attachment read back): no newline added."""
    stream = sys.stdout
    if stream is None or stream in _gone:
        return
    try:
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # (a text-only stream, in-process tests): the bytes as UTF-8 text
            stream.write(data.decode("utf-8", errors="replace"))
        else:
            buffer.write(data)
            buffer.flush()
        stream.flush()
    except OSError:
        _gone.add(stream)


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout is not None and sys.stdout.isatty()
    except (OSError, ValueError):
        return False


def reader_gone() -> bool:
    """Has stdout's reader gone away (``| head`` exited, the terminal closed)?

    For a command that only shows things and would otherwise wait on (``inspect --follow``): a
    run never asks, it goes on to its end. Known after a failed write (the stream is a sink
    since), or at once for a pipe whose read end closed (``poll`` reports POLLERR on it)."""
    stream = sys.stdout
    if stream is None or stream in _gone:
        return True
    raw = getattr(getattr(stream, "buffer", None), "raw", None)
    if getattr(raw, "gone", False):
        return True
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(mask & select.POLLERR for _, mask in poller.poll(0))
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def echo_json(data: Any, *, sort_keys: bool = False) -> None:
    """``data`` as indented JSON on stdout (values JSON cannot hold are written as their str)."""
    echo(json.dumps(data, indent=2, default=str, sort_keys=sort_keys))


# -- a plain table ---------------------------------------------------------------------------------
def _cells(text: str) -> int:
    """Terminal columns of ``text``: wide East Asian characters take two, combining marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def terminal_width() -> int:
    """Columns to fit output to: $COLUMNS, else the terminal's width, else 80 (``shutil``'s rule)."""
    import shutil

    return max(20, shutil.get_terminal_size((80, 24)).columns)


def output_width() -> int | None:
    """The width to fit stdout's lines to: the terminal's (or $COLUMNS) when stdout is a terminal
    or COLUMNS is set; None (nothing cut) when stdout goes to a pipe or a file, for scripts."""
    try:
        tty = sys.stdout.isatty()
    except (OSError, ValueError):
        tty = False
    columns = os.environ.get("COLUMNS", "").strip()  # a garbage value asks for nothing: shutil ignores it too
    return terminal_width() if tty or (columns.isdigit() and int(columns) > 0) else None


ELLIPSIS = "…"


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal columns; a cut text ends with ``…`` (never silently)."""
    if _cells(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = 0 if unicodedata.combining(ch) else (2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + ELLIPSIS


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], width: int | None = None,
          keep: Sequence[int] = ()) -> list[str]:
    """Aligned lines: a header row, then one line per row; columns two spaces apart, cells literal
    (``None`` shows empty). With ``width``, the widest columns are narrowed (their cut cells end
    with ``…``) until a line fits, then any line still too long is cut with ``…``. Columns in
    ``keep`` (an id to copy) are never narrowed."""
    grid = [list(headers), *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(_cells(r[i]) for r in grid) for i in range(len(headers))]
    if width is not None:
        floor = [widths[k] if k in keep else max(_cells(h), 4) for k, h in enumerate(headers)]
        while sum(widths) + 2 * (len(widths) - 1) > width:
            i = max(range(len(widths)), key=lambda k: widths[k] - floor[k])
            if widths[i] <= floor[i]:
                break
            widths[i] -= 1
        grid = [[fit(c, widths[i]) for i, c in enumerate(r)] for r in grid]
    lines = []
    for r in grid:
        cells = [c + " " * (widths[i] - _cells(c)) for i, c in enumerate(r)]
        line = "  ".join(cells).rstrip()
        lines.append(line if width is None else fit(line, width))
    return lines


# -- stdout/stderr that survive their reader -------------------------------------------------------
class _SinkOnError(io.RawIOBase):
    """A raw writer on descriptor ``fd``: once a write fails, ``fd`` points at /dev/null.

    Invariant: ``write`` never raises; after the first failure every byte is dropped (and any
    other writer of ``fd`` - the engine's ``print``, a child process - writes to /dev/null too).
    Closing it never closes ``fd``: the descriptor belongs to the process.
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.gone = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return not self.gone and os.isatty(self._fd)

    def write(self, data: Any) -> int:  # type: ignore[override]
        size = memoryview(data).nbytes
        while not self.gone:
            try:
                return os.write(self._fd, data)
            except BlockingIOError:  # a non-blocking descriptor that is full: wait, then retry
                select.select([], [self._fd], [])
            except OSError:
                self.gone = True
                _to_devnull(self._fd)
        return size


def _to_devnull(fd: int) -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(null, fd)
    except OSError:
        pass
    finally:
        if null != fd:
            os.close(null)


def _open_std_fds() -> None:
    """Descriptors 0, 1 and 2 that are closed at start are opened on /dev/null."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _guarded(stream: TextIO | None, fd: int, errors_default: str) -> TextIO:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or errors_default
    if errors == "strict":  # an unencodable character is shown escaped, never a crash of the display
        errors = "backslashreplace"
    if stream is not None:
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    line_buffering = bool(getattr(stream, "line_buffering", False))
    return io.TextIOWrapper(io.BufferedWriter(_SinkOnError(fd)), encoding=encoding, errors=errors,
                            line_buffering=line_buffering, write_through=fd == 2)


def guard_std_streams() -> None:
    """Point ``sys.stdout``/``sys.stderr`` at writers that never raise (see the module doc).

    Called once at process start by the ``iterion`` entry point (not by in-process test runners).
    """
    _open_std_fds()
    sys.stdout = _guarded(sys.stdout, 1, "strict")
    sys.stderr = _guarded(sys.stderr, 2, "backslashreplace")
