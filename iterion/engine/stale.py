"""Orphaned ``running`` runs: the takeover rules, start-up promotion, and ``--force-stale``.

A run says ``running`` but no process holds its execution lock (the kernel drops a flock when
its holder dies, SIGKILL included). Whether it may be taken over, and how soon:

* at once, when its recorded owner is PROVABLY dead on this host (``iterion.store.liveness``:
  same host, boot and pid namespace, and the pid is gone, a zombie, or reused by a process that
  started later). ``iterion resume --run-id R`` then takes it over without any flag, and the
  start-up sweep promotes it without waiting;
* after the grace window (60 s, docs/user-guide.md "Locks and takeover") without an event flush, otherwise - an owner
  on another host, a record without a start time whose pid exists, no /proc. ``--force-stale``
  takes it over then, and the sweep promotes it then.

Such a run is never restarted from the workflow entry:

* at start-up (``reconcile_orphans``: automatically when ``iterion run``, ``resume``, ``inspect``
  or ``rewind`` opens the store, and on demand with ``iterion reconcile``) it is promoted to
  ``failed_resumable`` with code ORPHANED_RUN, or to ``failed`` when it has no checkpoint to
  resume from, and ``run_orphan_promoted`` lands on its timeline;
* ``iterion resume`` takes it over directly (``admit_takeover``), under the resume's own lock, so
  two takeovers never both execute.

Every takeover first records a ``takeover:`` boundary (``iterion.engine.takeover``): what changed
since the run's last boundary cannot be attributed, and a later rewind says so.

Every refusal names the faster path when there is one (``iterion cancel`` moves a run no process
executes at once; ``--force-stale`` after the remaining seconds).

``ITERION_STALE_AFTER_S`` overrides the 60-second window. It exists for tests only (a crash test
cannot wait a minute per trial); do not set it in production.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrefs.persist.envsettings import env_seconds
from iterion.store.errors import StatusRefusedError
from iterion.store.layout import RunPaths
from iterion.store.liveness import Liveness, Verdict, owner_liveness
from iterion.store.lock import read_owner
from iterion.store.status import RunStatus
from iterion.store.store import STALE_AFTER_S

if TYPE_CHECKING:  # the sweep of every store-opening command (`inspect` too) imports no document model
    from iterion.store import RunDoc, RunLock, Store

STALE_ENV = "ITERION_STALE_AFTER_S"


def stale_after_s() -> float:
    """The grace window: 60 s, or ``$ITERION_STALE_AFTER_S`` (tests only; seconds >= 0, garbage
    refused: gitrefs/persist/envsettings.py)."""
    return env_seconds(STALE_ENV, STALE_AFTER_S, example="0")


def owner_verdict(doc: RunDoc) -> Verdict:
    """Is the process the run document names as its owner provably gone?"""
    if doc.owner is None:
        return Verdict(Liveness.UNKNOWN, "no owner was recorded")
    return owner_liveness(doc.owner.pid, doc.owner.host, doc.owner.proc_start)


def _event_age(store: Store, run_id: str) -> float | None:
    flushed = store.last_flush_time(run_id)
    return None if flushed is None else max(0.0, time.time() - flushed)


def _secs(value: float) -> str:
    return f"{math.ceil(value)} s" if value > 0 else "0 s"


def where(store: Store, run_id: str, owner: dict[str, Any] | None) -> str:
    """``on host H (pid P, last event 12 s ago)`` for messages."""
    owner = owner or {}
    age = _event_age(store, run_id)
    last = "no event yet" if age is None else f"last event {int(age)} s ago"
    return f"on host {owner.get('host', '?')} (pid {owner.get('pid', '?')}, {last})"


def held_refusal(store: Store, run_id: str) -> StatusRefusedError:
    """Another process holds the run's lock: say who, and what would be faster than waiting."""
    try:
        status = store.load_run(run_id).status
    except Exception:  # noqa: BLE001 - display only
        status = None
    at = where(store, run_id, read_owner(store.run_dir(run_id)))
    if status is RunStatus.RUNNING:
        return StatusRefusedError(
            f"run {run_id} is being executed by another process {at}: two processes never execute one run",
            hint=f"wait for it to end, or stop it now with `iterion cancel --run-id {run_id}` "
                 f"(it stays resumable) and then `iterion resume --run-id {run_id}`")
    what = status.value if status is not None else "unknown"
    return StatusRefusedError(
        f"run {run_id} ({what}) is being held by another iterion process {at}",
        hint="a rewind, cancel or reconcile holds it for a moment: retry when it is done")


@dataclass(frozen=True)
class Admission:
    how: str    # BY_RESUME (owner provably dead) | BY_FORCE_STALE (past the grace window)
    proof: str  # why the run was ownerless, for the timeline


def admit_takeover(store: Store, run_id: str, doc: RunDoc, lock: RunLock, *, force_stale: bool) -> Admission:
    """May ``resume`` take over this ``running`` run? The caller holds ``lock`` (so no other
    process executes it here). Refused with the faster path named."""
    from iterion.engine.takeover import BY_FORCE_STALE, BY_RESUME

    assert lock.held
    verdict = owner_verdict(doc)
    if verdict.dead:
        return Admission(BY_RESUME, f"no process holds its lock and {verdict.reason}")
    threshold = stale_after_s()
    age = _event_age(store, run_id)
    at = where(store, run_id, doc.owner.model_dump(mode="json") if doc.owner else None)
    cancel = (f"`iterion cancel --run-id {run_id}` (it stays resumable) and then "
              f"`iterion resume --run-id {run_id}`")
    if verdict.liveness is Liveness.ALIVE:  # e.g. a launch between writing its document and its lock
        raise StatusRefusedError(
            f"run {run_id} is running {at} and {verdict.reason}: it is not orphaned, whatever its lock says",
            hint=f"retry in a moment if it is starting or stopping; to stop it, {cancel}")
    quiet = age is None or age >= threshold
    if force_stale and quiet:
        since = "no event was ever flushed" if age is None else f"no event for {int(age)} s"
        return Admission(BY_FORCE_STALE, f"no process holds its lock, {since} ({verdict.reason})")
    if not force_stale and quiet:
        raise StatusRefusedError(
            f"run {run_id} is running {at}: no process here holds its lock, but {verdict.reason}, "
            "so it cannot be proven gone from this host",
            hint=f"if its process is gone, take it over now with `iterion resume --run-id {run_id} --force-stale`")
    wait = _secs(threshold - (age or 0.0))
    if force_stale:
        raise StatusRefusedError(
            f"run {run_id} is running {at} and {verdict.reason}: --force-stale takes over only after "
            f"{threshold:g} s without an event",
            hint=f"wait {wait}, or, if you know its process is gone, {cancel} now")
    raise StatusRefusedError(
        f"run {run_id} is running {at} and {verdict.reason}: it may still have an owner",
        hint=f"wait {wait} and take it over with `iterion resume --run-id {run_id} --force-stale`, or, "
             f"if you know its process is gone, {cancel} now")


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
    """Promote ``run_id`` if it is an orphaned ``running`` run; None when it is not (a live owner,
    or not yet past the grace window and its owner not provably dead)."""
    # the takeover machinery (versioning, the engine) is imported only when a run IS orphaned:
    # the start-up sweep of every store-opening command (`inspect` too) must stay cheap
    from iterion.engine.checkpoint_push import after_found_dead
    from iterion.engine.takeover import BY_PROMOTION, record_takeover
    from iterion.failure_codes import FailureCode
    from iterion.store import events as ev

    threshold = stale_after_s() if threshold_s is None else threshold_s
    lock = store.lock(run_id)
    if not lock.try_acquire():
        return None  # a live owner
    try:
        doc = store.load_run(run_id)
        if doc.status is not RunStatus.RUNNING:
            return None
        verdict = owner_verdict(doc)
        if verdict.dead:
            proof = f"no process holds its lock and {verdict.reason}"
        elif verdict.liveness is Liveness.ALIVE:
            return None  # its owner lives (a launch about to take its lock): not an orphan
        else:
            try:
                store.check_stale(run_id, own_lock=lock, threshold_s=threshold)
            except StatusRefusedError:
                return None
            proof = f"no process holds its lock and no event for {threshold:g} s ({verdict.reason})"
        try:
            cp = store.load_checkpoint(run_id)
        except Exception:  # noqa: BLE001 - an unreadable checkpoint is no checkpoint to resume from
            cp = None
        takeover = record_takeover(store, doc, cp, how=BY_PROMOTION, proof=proof)  # before the status moves
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
            "grace_s": threshold, "proof": proof, "takeover": takeover.label,
            "owner": doc.owner.model_dump(mode="json") if doc.owner else None})
        after_found_dead(store, run_id)  # bank it, record final_branch/_commit, push its state
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


def _provably_dead(store: Store, run_id: str) -> bool:
    try:
        return owner_verdict(store.load_run(run_id)).dead
    except Exception:  # noqa: BLE001 - unreadable: left to the grace window
        return False


def reconcile_orphans(store: Store, *, threshold_s: float | None = None, skip: str | None = None) -> list[Promotion]:
    """Start-up reconciliation: promote every stale ``running`` run of the store.

    ``iterion run``, ``resume``, ``inspect`` and ``rewind`` call it when they open the store (and
    ``iterion reconcile`` on demand). Cheap by construction: only runs the run index says are ``running``
    are looked at, each with a read-only lock probe; a run whose document or timeline was written
    within the grace window is left alone unless its owner is provably dead (a launch between
    creating its document and taking its lock has a live owner, so it is left alone too).
    ``promote_if_orphaned`` re-checks everything under the lock. ``skip``: the run the calling
    command is about to take over itself (``iterion resume --run-id``: its own takeover records
    how it happened).
    """
    threshold = stale_after_s() if threshold_s is None else threshold_s
    if store.shared:
        # a shared (JetStream) store: runs execute on other machines, whose locks this one cannot
        # probe; there the queue's lease and redelivery find dead owners, not this sweep
        return []
    if not store.runs_dir.is_dir():
        return []
    now = time.time()
    out: list[Promotion] = []
    # the run index names the candidates (iterion/store/runindex.py: it is repaired before it
    # answers, so a run whose last write says `running` is among them); each is re-read below
    for rid in sorted(r.id for r in store.index_rows() if r.status == "running"):
        d = store.runs_dir / rid
        run_json = RunPaths(d).run_json
        if d.name == skip or not _says_running(run_json):
            continue
        try:
            if store.is_locked(d.name):
                continue  # a live owner
        except ValueError:  # not a run id: not ours to touch
            continue
        if not (_quiet_for(run_json, threshold, now) and _quiet_for(RunPaths(d).events_jsonl, threshold, now)) \
                and not _provably_dead(store, d.name):
            continue
        promoted = promote_if_orphaned(store, d.name, threshold_s=threshold)
        if promoted is not None:
            out.append(promoted)
    return out
