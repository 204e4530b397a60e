"""Run references for the low-level commands (`refs`, `track`) that also work without a run store.

The one resolver is ``Store.resolve_run`` (a full id, a unique friendly name, or a unique id
prefix of 4+ characters). `refs` and `track` also drive runs no store knows (a hand-made ``r1``),
so here a reference that names no run of the store is passed on as it was typed; an ambiguous
prefix is still refused, since taking it literally would record under an id nobody meant.
"""

from __future__ import annotations

from pathlib import Path

from iterion.store.errors import AmbiguousRunRefError, StoreError
from iterion.store.ids import RUN_ID_RE, check_run_ref
from iterion.store.store import Store


def _store_near(track_store: Path | None, cwd: Path) -> Store | None:
    """The run store a track store lives in (``<store>/runs/<id>/track``), else the one ``cwd`` uses."""
    try:
        if track_store is not None:
            t = track_store.resolve()
            if t.name == "track" and t.parent.parent.name == "runs":
                return Store(t.parent.parent.parent)
        store = Store.open(None, cwd)
    except (StoreError, OSError):
        return None
    return store if store.runs_dir.is_dir() else None


def resolve_loose(ref: str, *, cwd: Path, track_store: Path | None = None) -> str:
    """``ref`` resolved in the nearby run store when it names one of its runs; else ``ref`` itself."""
    check_run_ref(ref)
    if RUN_ID_RE.match(ref):
        return ref
    store = _store_near(track_store, cwd)
    if store is None:
        return ref
    try:
        return store.resolve_run(ref)
    except AmbiguousRunRefError:
        raise
    except StoreError:
        return ref
