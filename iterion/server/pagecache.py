"""What the web pages would otherwise recompute on every load, kept while nothing it depends on moved.

* ``SourceCache``: a workflow file compiled (``compile_source``) once per *fingerprint* of the files
  it read: the path named, plus every unit file of the last compile (stat: inode, size, mtime,
  ctime). An edit to the main file or to any include changes the fingerprint; a new include can
  only come with an edit of a file already read. A file that does not compile is cached alike
  (its problem), so a broken file is not recompiled at every refresh either.
* ``Memo``: a bounded map for results keyed by what determines them (the run page's source
  change: run id, source digest, run version).
* ``TtlValue``: one value recomputed after ``ttl`` seconds (the index page's walk for ``.bot``
  files: a file added or removed shows within the TTL; an edit of a listed file shows at once,
  through ``SourceCache``).

All three are thread-safe: the pages are rendered in Starlette's thread pool.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Fingerprint = tuple[tuple[str, int, int, int, int] | tuple[str], ...]


def _stat(path: Path) -> tuple[str, int, int, int, int] | tuple[str]:
    try:
        st = os.stat(path)
    except OSError:
        return (str(path),)  # gone (or an archive member): appearing later changes the print
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class _Compiled:
    fingerprint: Fingerprint
    files: list[Path]
    source: Any = None        # the CompiledSource
    problem: Exception | None = None


class SourceCache:
    """``compile(path)``: the CompiledSource, or raises what ``compile_source`` raised (see module doc)."""

    def __init__(self, compile_fn: Callable[[Path], Any] | None = None, max_entries: int = 512) -> None:
        self._compile = compile_fn
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Compiled] = OrderedDict()
        self.compiles = 0  # how many real compiles ran (tests and the metrics of a curious operator)

    def _fingerprint(self, files: list[Path]) -> Fingerprint:
        return tuple(_stat(f) for f in files)

    def compile(self, path: Path | str) -> Any:
        key = str(Path(path).absolute())
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and self._fingerprint(hit.files) == hit.fingerprint:
            with self._lock:
                self._entries.move_to_end(key)
            if hit.problem is not None:
                raise hit.problem.with_traceback(None)  # the same instance: its traceback not grown
            return hit.source
        files = [Path(key)]
        print_before = self._fingerprint(files)  # taken before reading: an edit during the compile misses
        compile_fn = self._compile
        if compile_fn is None:
            from iterion.engine.source import compile_source  # heavy: imported when a page needs it

            compile_fn = compile_source
        self.compiles += 1
        try:
            src = compile_fn(Path(path))
        except Exception as exc:  # noqa: BLE001 - cached as the file's problem, raised to the caller
            entry = _Compiled(print_before, files, problem=exc)
        else:
            root = Path(key).parent if Path(key).is_file() and src.bundle_path is None else Path(key)
            units = [root / rel for rel in sorted(src.sources) if (root / rel) != Path(key)]
            files = files + units
            entry = _Compiled(print_before + self._fingerprint(units), files, source=src)
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        if entry.problem is not None:
            raise entry.problem
        return entry.source


class Memo(Generic[T]):
    """A bounded, thread-safe map: ``get_or(key, make)``."""

    def __init__(self, max_entries: int = 256) -> None:
        self._max = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, T] = OrderedDict()

    def get_or(self, key: Any, make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = make()
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value


class TtlValue(Generic[T]):
    """One value, recomputed by ``make`` once it is older than ``ttl`` seconds (monotonic clock)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._value: tuple[float, Any, T] | None = None

    def get(self, key: Any, make: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            cur = self._value
        if cur is not None and cur[1] == key and now - cur[0] < self.ttl:
            return cur[2]
        value = make()
        with self._lock:
            self._value = (now, key, value)
        return value
