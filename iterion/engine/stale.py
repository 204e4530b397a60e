"""Orphaned ``running`` runs: the staleness rule, start-up promotion, and ``--force-stale`` takeover.

A run is an orphan when it says ``running`` but no process holds its execution lock (the kernel
drops a flock when its holder dies, SIGKILL included) AND its timeline was not flushed for the
grace window (60 s, the spec's figure). Such a run is never restarted from the workflow entry:

* at start-up (``reconcile_orphans``: automatically when ``iterion run``, ``resume``, ``inspect``
  or ``rewind`` opens the store, and on demand with ``iterion reconcile``) it is promoted to
  ``failed_resumable`` with code ORPHANED_RUN, or to ``failed`` when it has no checkpoint to
  resume from, and ``run_orphan_promoted`` lands on its timeline;
* ``iterion resume --force-stale`` takes it over directly (``check_takeover``), under the
  resume's own lock, so two takeovers never both execute.

``ITERION_STALE_AFTER_S`` overrides the 60-second window. It exists for tests only (a crash test
cannot wait a minute per trial); do not set it in production.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iterion.failure_codes import FailureCode
from iterion.store import RunLock, RunStatus, Store
from iterion.store import events as ev
from iterion.store.events import events_path
from iterion.store.layout import RunPaths
from iterion.store.errors import StatusRefusedError
from iterion.store.store import STALE_AFTER_S

STALE_ENV = "ITERION_STALE_AFTER_S"


def stale_after_s() -> float:
    """The grace window: 60 s, or ``$ITERION_STALE_AFTER_S`` (tests only)."""
    raw = os.environ.get(STALE_ENV)
    if not raw:
        return STALE_AFTER_S
    try:
        value = float(raw)
    except ValueError:
        return STALE_AFTER_S
    return value if math.isfinite(value) and value >= 0 else STALE_AFTER_S


def check_takeover(store: Store, run_id: str, lock: RunLock) -> None:
    """``--force-stale``: refuse unless the running run is provably ownerless (the caller holds
    ``lock``, which already proves no other process executes it; the flush age must also pass)."""
    store.check_stale(run_id, own_lock=lock, threshold_s=stale_after_s())


@dataclass
class Promotion:
    run_id: str
    status: str
    has_checkpoint: bool
    restart_node: str | None

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "has_checkpoint": self.has_checkpoint,
                "restart_node": self.restart_node}


def promote_if_orphaned(store: Store, run_id: str, *, threshold_s: float | None = None) -> Promotion | None:
    """Promote ``run_id`` if it is a stale ``running`` run; None when it is not (or not stale)."""
    threshold = stale_after_s() if threshold_s is None else threshold_s
    lock = store.lock(run_id)
    if not lock.try_acquire():
        return None  # a live owner
    try:
        doc = store.load_run(run_id)
        if doc.status is not RunStatus.RUNNING:
            return None
        try:
            store.check_stale(run_id, own_lock=lock, threshold_s=threshold)
        except StatusRefusedError:
            return None
        try:
            cp = store.load_checkpoint(run_id)
        except Exception:  # noqa: BLE001 - an unreadable checkpoint is no checkpoint to resume from
            cp = None
        if cp is not None:
            new, code = RunStatus.FAILED_RESUMABLE, FailureCode.ORPHANED_RUN.value
            error = (f"the process executing run {run_id} went away; promoted to failed_resumable at "
                     f"{cp.restart_node or 'its checkpoint'} (resume it with `iterion resume --run-id {run_id}`)")
        else:
            new, code = RunStatus.FAILED, FailureCode.ORPHANED_RUN.value
            error = f"the process executing run {run_id} went away before any checkpoint was written"
        store.update_run(run_id, lambda d: d.set_status(new, failure_code=code, error=error))
        store.events(run_id).append(ev.RUN_ORPHAN_PROMOTED, node=cp.restart_node if cp else None, payload={
            "to_status": new.value, "code": code, "restart_node": cp.restart_node if cp else None,
            "grace_s": threshold, "owner": doc.owner.model_dump(mode="json") if doc.owner else None})
        return Promotion(run_id, new.value, cp is not None, cp.restart_node if cp else None)
    finally:
        lock.release()


def _says_running(run_json: Path) -> bool:
    """The run document's status, read without validating the whole document (the sweep runs on
    every command that opens the store, so the common case - not running - must be cheap)."""
    try:
        data = run_json.read_bytes()
        return b"running" in data and json.loads(data).get("status") == RunStatus.RUNNING.value
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_for(path: Path, threshold: float, now: float) -> bool:
    try:
        return now - path.stat().st_mtime >= threshold
    except FileNotFoundError:
        return True


def reconcile_orphans(store: Store, *, threshold_s: float | None = None) -> list[Promotion]:
    """Start-up reconciliation: promote every stale ``running`` run of the store.

    ``iterion run``, ``resume``, ``inspect`` and ``rewind`` call it when they open the store (and
    ``iterion reconcile`` on demand). Cheap by construction: only documents that say ``running``
    are looked at, each with a read-only lock probe; a run whose document or timeline was written
    within the grace window is left alone (that also covers a launch between creating its
    document and taking its lock). ``promote_if_orphaned`` re-checks everything under the lock.
    """
    threshold = stale_after_s() if threshold_s is None else threshold_s
    if not store.runs_dir.is_dir():
        return []
    now = time.time()
    out: list[Promotion] = []
    for d in sorted(store.runs_dir.iterdir()):
        run_json = RunPaths(d).run_json
        if not _says_running(run_json):
            continue
        try:
            if store.is_locked(d.name):
                continue  # a live owner
        except ValueError:  # not a run id: not ours to touch
            continue
        if not (_quiet_for(run_json, threshold, now) and _quiet_for(events_path(d), threshold, now)):
            continue
        promoted = promote_if_orphaned(store, d.name, threshold_s=threshold)
        if promoted is not None:
            out.append(promoted)
    return out
