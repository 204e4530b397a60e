"""The workspace-checkpoint recovery hint, read from a run's timeline (one home for the rule).

A run that pushes its workspace state appends ``run_workspace_checkpoint`` events with the
payload ``{ref, commit, remote, time}`` (one per successful push); a push that failed appends
``run_workspace_checkpoint_failed`` ``{ref, remote, error, time}`` instead. The hint names the
LATEST SUCCESSFUL push: a later failure never erases it; with no success the hint is absent (no
ref is ever invented from the run id); an unreadable timeline is an error, not an absent hint.

Everything that shows the hint (``inspect``, the HTTP service's ``run.workspace_checkpoint`` and
the unavailable-``/commits`` answer, ``iterion remote``) calls :func:`recovery_hint`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from iterion.store.events import RUN_WORKSPACE_CHECKPOINT, Event, RunWorkspaceCheckpointPayload, payload

if TYPE_CHECKING:
    from iterion.store.store import Store

VERIFY_TEMPLATE = "git rev-parse FETCH_HEAD  # must print {commit}"


def hint_from_events(events: Iterable[Event]) -> dict[str, Any] | None:
    """The recovery hint for the newest successful push in ``events``, or None.

    Keys: ref, commit, remote, seq (the event's sequence number), time (ISO 8601 UTC),
    source ("run_workspace_checkpoint"), fetch_command (run from a clone whose origin is the run's
    repository), verify (how to check FETCH_HEAD against the recorded commit).
    """
    last: Event | None = None
    for ev in events:
        if ev.type != RUN_WORKSPACE_CHECKPOINT:
            continue
        p = payload(ev, RunWorkspaceCheckpointPayload)
        if isinstance(p.get("ref"), str) and isinstance(p.get("commit"), str) and p["ref"] and p["commit"]:
            last = ev
    if last is None:
        return None
    p = payload(last, RunWorkspaceCheckpointPayload)
    ref, commit = p["ref"], p["commit"]
    remote = p.get("remote") if isinstance(p.get("remote"), str) and p.get("remote") else "origin"
    # the hint is run from a clone of the run's repository with that repository as origin (the
    # spec's recovery loop), so the command names origin whatever remote name the run pushed to
    return {
        "ref": ref,
        "commit": commit,
        "remote": remote,
        "seq": last.seq,
        "time": last.time.isoformat().replace("+00:00", "Z"),
        "source": RUN_WORKSPACE_CHECKPOINT,
        "fetch_command": f"git fetch origin {shlex.quote(ref)}",
        "verify": VERIFY_TEMPLATE.format(commit=commit),
    }


def recovery_hint(store: Store, run_id: str) -> dict[str, Any] | None:
    """The hint for ``run_id`` in ``store`` .

    Reading the timeline fails loudly: an OSError from the event log propagates (an event-store
    read failure is an error, never an absent hint). Invalid lines are moved aside by the reader
    with a warning and the remaining valid lines still count.
    """
    return hint_from_events(store.read_events(run_id))
