"""Bounded node output: what a tool prints and what an agent answers is kept inline (in the node's
output, the checkpoint, the events) only up to a cap; all of it goes to a file beside the run.

The cap, ``$ITERION_OUTPUT_INLINE_MAX`` (bytes, default 1 MiB), is the inline budget of ONE node
output. A tool's stdout and stderr each keep at most half of it (a tool's output without a
schema holds its stdout twice, as ``result`` and ``stdout``, so the node's output stays under
1.5 times the cap); an agent's answer text keeps at most the cap. The measure is the value as
stored, JSON-escaped: 1 MiB of NUL bytes keeps 1/6 MiB of them (each is ``\\u0000`` on disk).

A tool writes its streams straight into ``<run>/outputs/<node>.<iteration>.<stamp>.stdout`` (and
``.stderr``): iterion never holds more than the inline part in memory, however much the tool
prints. A stream within its share is read back and its file removed; a longer one keeps the file
and its inline value is its head, marked in the node's output under ``truncated``:
``{"stdout": {"truncated": true, "size": <bytes printed>, "kept": <bytes inline>, "path": <file>}}``.
``iterion inspect`` and the web page show the mark (docs/technical/processes.md, "Bounded node output").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gitrefs.persist.envsettings import env_number

INLINE_ENV = "ITERION_OUTPUT_INLINE_MAX"
DEFAULT_INLINE = 1024 * 1024
_MAX_INLINE = 256 * 1024 * 1024
OUTPUTS_DIR = "outputs"  # under the run's directory
TRUNCATED_KEY = "truncated"  # the key of the marks in a node's output


def inline_cap(environ: dict[str, str] | None = None) -> int:
    """The inline budget of one node output, in bytes (raises EnvSettingError on garbage)."""
    return int(env_number(INLINE_ENV, DEFAULT_INLINE, zero_ok=False, maximum=_MAX_INLINE,
                          what="a number of bytes", example=str(DEFAULT_INLINE), environ=environ))


@dataclass(frozen=True)
class Captured:
    """One captured stream: its inline text, how much was produced, and where all of it is."""

    text: str
    size: int              # bytes produced
    kept: int              # bytes of it inline
    path: str | None       # the file holding all of it (None: not kept, or within the cap)

    @property
    def truncated(self) -> bool:
        return self.kept < self.size

    def mark(self) -> dict[str, Any]:
        return {"truncated": True, "size": self.size, "kept": self.kept, "path": self.path}


def encoded_len(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def head_within(data: bytes, budget: int) -> tuple[str, int]:
    """The longest decoded head of ``data`` whose stored (JSON-escaped) size is within ``budget``,
    and how many bytes of ``data`` it holds."""
    kept = min(len(data), budget)
    while True:
        text = data[:kept].decode("utf-8", "replace")
        size = encoded_len(text)
        if size <= budget or kept == 0:
            return text, kept
        kept = max(0, min(kept - 1, kept * budget // size))


def stream_file(prefix: Path | None, stream: str) -> tuple[IO[bytes], Path | None]:
    """Where a child writes one stream: ``<prefix>.<stream>`` beside the run, else an unnamed
    temporary file (nothing is kept over the cap)."""
    import tempfile

    if prefix is None:
        return tempfile.TemporaryFile(), None  # noqa: SIM115 - closed by the caller's ExitStack
    prefix.parent.mkdir(parents=True, exist_ok=True)
    path = prefix.with_name(f"{prefix.name}.{stream}")
    return open(path, "w+b"), path  # noqa: SIM115 - same


def take(fh: IO[bytes], path: Path | None, budget: int) -> Captured:
    """Read back a stream the child wrote: all of it when within ``budget`` (and its file
    removed), else its head, the file kept. Never reads more than ``budget`` bytes."""
    fh.flush()
    size = os.fstat(fh.fileno()).st_size
    fh.seek(0)
    data = fh.read(budget)
    text, kept = head_within(data, budget)
    if kept >= size:
        if path is not None:
            path.unlink(missing_ok=True)
        return Captured(text, size, size, None)
    return Captured(text, size, kept, str(path) if path is not None else None)


def spill_text(text: str, path: Path, budget: int) -> Captured | None:
    """An agent's answer over ``budget``: written whole to ``path`` (atomically), its head kept.
    None when it is within the budget."""
    if encoded_len(text) <= budget:
        return None
    from gitrefs.persist.atomic import atomic_write_bytes

    data = text.encode("utf-8", "surrogateescape")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)
    head, kept = head_within(data[:budget], budget)
    return Captured(head, len(data), kept, str(path))


def output_prefix(run_dir: Path, node: str, iteration: int) -> Path:
    """``<run>/outputs/<node>.<iteration>.<UTC stamp>``: one per execution, so a re-execution
    never overwrites what an earlier checkpoint's mark points to."""
    from datetime import UTC, datetime

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return run_dir / OUTPUTS_DIR / f"{node}.{iteration}.{stamp}"
