"""The store's index of friendly run names: ``<store>/names/<name>`` holds the id of the run
that owns ``name``, so a launch picks a unique name in O(1) instead of reading every run.json.

Claims happen under ``<store>/names.lock`` (``Store.create_run`` holds it around the claim and
the write of run.json), so two launches cannot take one name: the later one gets ``-2``, ``-3``...
The index is built from the runs on first use (a store written before it existed). An entry whose
run is gone (a run directory removed by hand, a creation that failed half-way) is stale and
reclaimed. A crash after a claim and before run.json is written leaves such a stale entry: it
costs nothing and is reclaimed by the next launch that draws that name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from iterion.store.errors import StoreError

NAMES_DIR = "names"
_INDEXABLE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$")


def indexable(name: str) -> bool:
    """Whether ``name`` can be an index entry (a plain file name); other names are checked by scan."""
    return bool(_INDEXABLE.match(name))


class NameIndex:
    def __init__(self, root: Path, runs: Callable[[], Iterable[tuple[str, str]]], exists: Callable[[str], bool]) -> None:
        self.dir = Path(root) / NAMES_DIR
        self._runs = runs  # (id, name) of every readable run, oldest first
        self._exists = exists

    def _ensure(self) -> None:
        if self.dir.is_dir():
            return
        if self.dir.exists() or self.dir.is_symlink():  # os.replace below would name its temp directory
            raise StoreError(f"the store's name index {self.dir} is not a directory",
                             hint=f"move {self.dir} aside and retry: the index is rebuilt from the runs")
        import secrets  # (the writers': listing runs imports this module and writes nothing)

        tmp = self.dir.with_name(f".{NAMES_DIR}.{secrets.token_hex(4)}.tmp")
        tmp.mkdir(parents=True)
        for rid, name in self._runs():
            if name and indexable(name) and not (tmp / name).exists():
                (tmp / name).write_text(rid)
        os.replace(tmp, self.dir)

    def _owner(self, name: str) -> str | None:
        try:
            owner = (self.dir / name).read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return owner if owner and self._exists(owner) else None
        except ValueError:
            return None

    def taken(self) -> set[str]:
        """Names in use (a fresh name is drawn outside them). Writes nothing: before the index
        exists (a new or an older store) the runs are read instead."""
        if not self.dir.is_dir():
            return {name for _, name in self._runs() if name}
        return {n for n in os.listdir(self.dir) if not n.startswith(".")}

    def claim(self, name: str, run_id: str) -> str:
        """``name`` or the first free ``name-N``, recorded as ``run_id``'s (call under names.lock)."""
        self._ensure()
        n = 1
        while True:
            cand = name if n == 1 else f"{name}-{n}"
            owner = self._owner(cand)
            if owner is None or owner == run_id:
                from gitrefs.persist.atomic import atomic_write_bytes

                atomic_write_bytes(self.dir / cand, run_id.encode())
                return cand
            n += 1


    def release(self, name: str, run_id: str) -> None:
        """Drop ``name``'s entry if ``run_id`` holds it (its creation failed: no trace is left)."""
        try:
            if (self.dir / name).read_text().strip() == run_id:
                (self.dir / name).unlink()
        except OSError:
            pass


__all__ = ["NAMES_DIR", "NameIndex", "indexable"]
