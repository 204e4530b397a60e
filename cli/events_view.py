"""`inspect --events`: a run's timeline for a person, filtered, fitted to the terminal, or followed live.

By default the bookkeeping events (checkpoints and boundaries written, workspace captures, edge
choices, backend call records) are hidden: they are the engine's ledger, not what happened to
the work; ``--all`` shows them, and naming a type with ``--type`` shows that type whatever it is.
``--node`` keeps the events of the named nodes. On a terminal (or with COLUMNS set) every line is
cut to its width with a final ``…``; into a pipe or a file lines are whole.

``--follow`` prints the timeline so far, then each new event as the run appends it, and stops
when the run is no longer ``running`` (parked, finished, failed, cancelled) once every event is
shown; a run whose process died without saying so (status ``running``, lock not held, nothing
new for ``STALL_S``) stops the follow with a note instead of waiting forever. Reading only:
following never writes to the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cli.output import echo, fit, output_width, reader_gone

BOOKKEEPING = frozenset({
    "checkpoint_written", "boundary_written", "run_workspace_checkpoint", "workspace_capture_skipped",
    "edge_selected", "backend_call",
})
STALL_S = 5.0


def keep(event: Any, *, show_all: bool, types: Sequence[str], nodes: Sequence[str]) -> bool:
    if types and event.type not in types:
        return False
    if nodes and event.node not in nodes:
        return False
    return show_all or bool(types) or event.type not in BOOKKEEPING


def line(event: Any, width: int | None) -> str:
    payload = json.dumps(event.payload, ensure_ascii=False) if event.payload else ""
    text = f"{event.seq:>4} {event.time:%H:%M:%S} {event.type:<22} {event.node or '':<14} {payload}"
    return text.rstrip() if width is None else fit(text.rstrip(), width)


def show(events: Iterable[Any], *, show_all: bool, types: Sequence[str], nodes: Sequence[str]) -> int:
    """Print the kept ``events``; the last sequence number seen (kept or not), 0 for none."""
    width = output_width()
    last = 0
    for e in events:
        last = max(last, e.seq)
        if keep(e, show_all=show_all, types=types, nodes=nodes):
            echo(line(e, width))
    return last


def follow(read_after: Callable[[int], list[Any]], status: Callable[[], str], held: Callable[[], bool],
           *, after: int, show_all: bool, types: Sequence[str], nodes: Sequence[str],
           locked: Callable[[], bool] | None = None) -> str:
    """Stream new events until the run parks (``iterion.store.follow``: the one follow loop, the
    HTTP API's too); return the status it ended in. ``held``: whether an owner may still live
    (for the stall note); ``locked``: whether this machine's lock is held (default ``held``)."""
    from iterion.store.follow import Follower
    from iterion.store.follow import follow as follow_run

    follower: Follower[Any] = Follower(lambda seq: (read_after(seq), False), status, locked or held,
                                       lambda e: int(e.seq), last=after)
    quiet_since = time.monotonic()
    for new in follow_run(follower):
        if new:
            show(new, show_all=show_all, types=types, nodes=nodes)
            quiet_since = time.monotonic()
        if follower.ended is not None:
            return follower.ended
        if reader_gone():  # `inspect --follow | head -1`: nobody reads on; stop, the run goes on
            return status()
        if time.monotonic() - quiet_since > STALL_S and not held():
            echo("(the run is marked running but no process holds it; `iterion reconcile` promotes it)")
            return status()
    return follower.ended or status()
