"""Check first, then change: what ``rewind``, ``resume`` and ``cancel`` verify before they write.

Each check only reads (``stat``, ``access(2)``, reading a file): a refusal leaves the workspace
and the run store exactly as they were, and says so in one line (exit 2, environment trouble).
The commands call these after taking the run's lock and before their first write of any kind
(the run document, the checkpoint, the event log, the workspace).
"""

from __future__ import annotations

import os
from pathlib import Path

from iterion.engine.errors import PreflightError
from iterion.store import Checkpoint, Store
from iterion.store import events as ev

UNCHANGED = "nothing was changed"


def _why(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def check_event_log(store: Store, run_id: str) -> list[ev.Event]:
    """The run's timeline must be readable and appendable; returns its events."""
    if store.shared:  # no local file to probe: the backend answers (or names its outage)
        return store.read_events(run_id)
    path = store.paths(run_id).events_jsonl
    try:
        events = store.read_events(run_id)
    except OSError as exc:
        raise PreflightError(f"the event log {path} of run {run_id} cannot be read ({_why(exc)}); {UNCHANGED}",
                             hint=f"repair or move {path} aside, then retry") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise PreflightError(f"the event log {path} of run {run_id} is not writable; {UNCHANGED}",
                             hint="make the run store writable, then retry")
    return events


def check_run_dir(store: Store, run_id: str) -> None:
    """The run's directory must be writable (the run document, checkpoint and intent live there)."""
    d = store.run_dir(run_id)
    if store.shared:  # the local half of a shared run: made on the first machine that touches it
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PreflightError(f"the run directory {d} cannot be made ({_why(exc)}); {UNCHANGED}",
                                 hint="make the work directory writable, then retry") from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise PreflightError(f"the run directory {d} is not writable; {UNCHANGED}",
                             hint="make the run store writable, then retry")


def check_checkpoint(store: Store, run_id: str) -> Checkpoint | None:
    """The checkpoint, if there is one, must be readable (CorruptDocumentError otherwise)."""
    return store.load_checkpoint(run_id)


def check_workspace(path: Path | None, run_id: str, *, fix: str, writable: bool = True) -> Path:
    """The run's workspace must exist as a (``writable``) directory; ``fix`` is the hint."""
    if path is None:
        raise PreflightError(f"run {run_id} recorded no workspace; {UNCHANGED}", hint=fix)
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise PreflightError(f"the workspace {path} of run {run_id} {what}; {UNCHANGED}", hint=fix)
    if writable and not os.access(path, os.W_OK | os.X_OK):
        raise PreflightError(f"the workspace {path} of run {run_id} is not writable; {UNCHANGED}",
                             hint="make it writable (is it on a read-only mount?), then retry")
    return path
