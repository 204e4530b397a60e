"""`iterion dev`'s inputs: saves of the workflow's files (debounced) and the person's typed lines.

Files are polled (content digests, every ``POLL_S``): no new dependency, and an editor that
writes a temporary file then renames it over the original is seen like any other write. A
change is reported once the files have been quiet for ``debounce_s`` (editors write several
times per save). Lines typed at the terminal are read only while stdin is readable (``select``),
so the main thread can take stdin back as soon as the watch stops. While a gate's questions are
open the watch runs beside them without reading stdin (``wait(lines=False)``), and the answers
are read by ``answer_reader``, which a save interrupts.
"""

from __future__ import annotations

import hashlib
import select
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.1
DEBOUNCE_S = 0.4


def unit_files(source: Path) -> list[Path]:
    """The main file and every file it imports or includes (the main file alone when the unit
    cannot be read now: an invalid save is watched for its fix)."""
    from iterion.rewind.sources import disk_unit

    try:
        _, files = disk_unit(source)
    except Exception:  # noqa: BLE001 - an unreadable unit: watch what we know
        files = []
    main = source / "main.bot" if source.is_dir() else source
    return sorted({main.absolute(), *files})


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "-"  # missing (mid-rename) counts as a state of its own


@dataclass
class Event:
    kind: str  # "save" | "line" | "stopped"
    text: str = ""


class Watch:
    """Snapshots of the watched files; ``wait`` returns the next save, typed line, or stop."""

    def __init__(self, source: Path, *, debounce_s: float = DEBOUNCE_S, read_stdin: bool = True) -> None:
        self.source = source
        self.debounce_s = debounce_s
        self.read_stdin = read_stdin
        self.files = unit_files(source)
        self.seen = self._snapshot()

    def _snapshot(self) -> dict[Path, str]:
        return {p: _digest(p) for p in self.files}

    def rescan(self) -> None:
        """After a save is handled: watch the unit as it is now (new imports included)."""
        self.files = unit_files(self.source)
        self.seen = self._snapshot()

    def _line(self, timeout: float, lines: bool = True) -> str | None:
        if not (self.read_stdin and lines):
            time.sleep(timeout)
            return None
        try:
            ready, _, _ = select.select([sys.stdin], [], [], timeout)
        except (OSError, ValueError):
            self.read_stdin = False
            return None
        if not ready:
            return None
        line = sys.stdin.readline()
        if line == "":  # end of input: no more typed commands
            self.read_stdin = False
            return "q"
        return line.strip()

    def wait(self, stop: threading.Event | None = None, *, lines: bool = True) -> Event:
        """The next save, typed line (``lines=False``: stdin is someone else's), or a stop."""
        changed_at: float | None = None
        while stop is None or not stop.is_set():
            line = self._line(POLL_S, lines)
            if line is not None:
                return Event("line", line)
            now = self._snapshot()
            if now != self.seen:
                self.seen = now
                changed_at = time.monotonic()
            elif changed_at is not None and time.monotonic() - changed_at >= self.debounce_s:
                return Event("save")
        return Event("stopped")


def _discard_typed() -> None:
    """Drop what was typed at the terminal and not yet sent with Enter."""
    try:
        import termios

        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):  # not a terminal: nothing is half-typed
        pass


def answer_reader(changed: threading.Event, quit_word: str = "q") -> Callable[[str], str]:
    """A gate answer's reader (``cli.prompting.reading_with``): ``input`` that ``changed`` (set
    by the watch on a save) interrupts with ``Interrupted``; ``quit_word`` alone on a line stops
    the questions (``Stop``). Polled with ``select`` so the save is seen while the person types."""
    from cli.output import echo
    from cli.prompting import Interrupted, Stop

    def read(prompt: str) -> str:
        echo(prompt, nl=False)
        while True:
            if changed.is_set():
                _discard_typed()  # a half-typed answer belongs to the withdrawn question
                raise Interrupted("the workflow changed: the question is withdrawn")
            ready, _, _ = select.select([sys.stdin], [], [], POLL_S)
            if not ready:
                continue
            line = sys.stdin.readline()
            if line == "":
                raise EOFError
            text = line.rstrip("\n")
            if text.strip() == quit_word:
                raise Stop("quit: the run stays parked")
            return text

    return read
