"""Opening the run store for a command: the one home of what `iterion run`, `resume`, `inspect`,
`rewind`, `dev` (cli/storeopts.py) and ``iterion.api`` do before they touch a run.

1. the store: given, or found (``iterion.store.opener``: --nats, $ITERION_NATS_URL, the store
   directory, the git repository or project of ``cwd``);
2. a writing command: a read-only or full store is refused before anything is written;
3. the orphan sweep: stale ``running`` runs promoted (``iterion.engine.stale``). Best effort: a
   sweep problem never stops the command, it is returned for the caller to report (the CLI
   prints one warning line; the API stays silent).

Nothing here prints: the CLI words what happened, the API returns typed results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from iterion.engine.stale import Promotion
    from iterion.store import Store


def open_command_store(store: Store | str | Path | None, *, write: bool, nats: str | None = None,
                       cwd: Path | None = None) -> Store:
    """The command's store: ``store`` when it is one, else opened from that directory (None: found
    from ``cwd``, default the current directory); ``write``: refuse a read-only or full one first."""
    from iterion.store import Store

    if isinstance(store, Store):
        st = store
    else:
        from iterion.store.opener import open_store

        st = open_store(Path(store) if store is not None else None, nats=nats, cwd=cwd or Path.cwd())
    if write:
        from gitrefs.persist.writable import nearest_existing
        from iterion.store.location import check_store_space, check_store_writable
        from iterion.store.reserve import MIN_RESERVE_BYTES

        check_store_writable(st.root, st.runs_dir)
        check_store_space(nearest_existing(st.root), MIN_RESERVE_BYTES)
    return st


@dataclass(frozen=True)
class Sweep:
    """What the start-up sweep did: the runs it promoted, or the problem that stopped it."""

    promoted: tuple[Promotion, ...] = ()
    error: Exception | None = None


def sweep_orphans(store: Store, skip: str | None = None) -> Sweep:
    """Promote the store's stale ``running`` runs; never raises for a sweep problem (returned).
    ``skip``: the run the command takes over itself (id, prefix or name; unknown here: ignored,
    the command itself says so)."""
    from iterion.engine.stale import reconcile_orphans

    try:
        if skip is not None:
            try:
                skip = store.resolve_run(skip)
            except Exception:  # noqa: BLE001 - not a run here: the command itself will say so
                skip = None
        return Sweep(promoted=tuple(reconcile_orphans(store, skip=skip)))
    except Exception as exc:  # noqa: BLE001 - a sweep problem must not block the command
        return Sweep(error=exc)
