"""``iterion runner``: claim deliveries from the work queue and execute them, N at a time.

Per claim (one thread per concurrent slot, each with its own pull subscription):

1. an undecodable message is terminated; the run's lease is taken (``iterion.queue.lease``) or
   the delivery is offered again later (NAK with a delay): two runners never execute one run;
2. the delivery is kept alive with in-progress acks while anything happens (clone, execution);
3. ``iterion.queue.policy.on_claim`` decides from the run's CURRENT document: launch the queued
   run, resume it, take over a run whose runner died, or drop the delivery (with an event);
4. a run bound to a repository executes in a fresh clone (``iterion.runner.clone``), pushing its
   workspace checkpoints to the clone's origin at every stop and every ``push_every`` nodes;
5. the result is disposed of by ``policy.after_run``: ack, NAK with the table's delay, park on
   the dead-letter stream (the run marked DLQ_PARKED), each with its event on the run's timeline.

The run's store writes go through ``iterion.runner.fence.FencedStore``: once the lease is lost (another runner
took the run after ours expired), every further write is refused, so the stale execution stops at
its next write (a node boundary at the latest) and never overwrites the new owner's state.

Control: a cancel/pause published on the run's control subject becomes the engine's own control
request (``iterion.engine.control``), exactly as ``iterion cancel``/``pause`` on this machine.

Shutdown (SIGTERM, SIGINT): claiming stops; runs in flight get ``grace_s`` to finish; then each is
cancelled (its checkpoint anchored at the node executing, its workspace pushed), marked
interrupted, and its delivery NAKed so another runner resumes it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind
from iterion.engine.cancel import CancelToken
from iterion.queue import policy
from iterion.queue.delivery import Delivery
from iterion.queue.jsqueue import Claimed, WorkQueue
from iterion.queue.lease import Lease, LeaseHeld
from iterion.queue.policy import Action, Disposition, Verb
from iterion.runner.clone import CloneError, RepoMissingError
from iterion.runner.fence import FencedStore, LeaseLostError
from iterion.store import RunStatus, Store
from iterion.store import events as ev
from iterion.store.errors import RunNotFoundError, StoreError
from iterion.store.jetstream.bridge import StoreUnavailableError

log = logging.getLogger("iterion.runner")


@dataclass
class RunnerConfig:
    work_dir: Path
    concurrency: int = 1
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    grace_s: float = 30.0
    push_every: int = 1          # push the workspace every N nodes (a SIGKILL loses at most that)
    fetch_timeout_s: float = 1.0


@dataclass
class InFlight:
    run_id: str
    token: CancelToken
    claimed: Claimed
    started: float = field(default_factory=time.monotonic)


def _say(message: str) -> None:
    log.info("%s", message)


class Runner:
    def __init__(self, store: Store, queue: WorkQueue, config: RunnerConfig,
                 *, say: Callable[[str], None] = _say) -> None:
        self.store, self.queue, self.config = store, queue, config
        self.say = say
        self.stopping = threading.Event()
        self._inflight: dict[str, InFlight] = {}
        self._lock = threading.Lock()
        self.handled = 0

    # -- the loop -----------------------------------------------------------------------------------
    def serve(self) -> None:
        """Claim until ``stop()``; returns once every slot has finished or handed its run back."""
        threads = [threading.Thread(target=self._slot, args=(i,), name=f"runner-slot-{i}", daemon=True)
                   for i in range(self.config.concurrency)]
        for t in threads:
            t.start()
        advisory = self.queue.listen_exhausted(
            lambda seq: threading.Thread(target=self._exhausted_retried, args=(seq,), daemon=True).start())
        self.say(f"{self.config.name} claiming from {self.queue.url} ({self.queue.stream}), "
                 f"concurrency {self.config.concurrency}, work dir {self.config.work_dir}")
        try:
            while any(t.is_alive() for t in threads):
                if self.stopping.is_set():
                    self._drain(threads)
                    break
                time.sleep(0.1)
        finally:
            for t in threads:
                t.join(self.config.grace_s + 30)
            self.queue.stop_listening(advisory)

    def stop(self) -> None:
        self.stopping.set()

    def _drain(self, threads: list[threading.Thread]) -> None:
        with self._lock:
            n = len(self._inflight)
        if n:
            self.say(f"shutting down: {n} run(s) in flight get {self.config.grace_s:g}s to finish")
        deadline = time.monotonic() + self.config.grace_s
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            with self._lock:
                if not self._inflight:
                    break
            time.sleep(0.1)
        with self._lock:
            left = list(self._inflight.values())
        for f in left:
            f.token.cancel("the runner is shutting down; another runner resumes it")

    def _slot(self, index: int) -> None:
        sub = None
        while not self.stopping.is_set():
            try:
                if sub is None:
                    sub = self.queue.subscription()
                claimed = self.queue.fetch(sub, timeout_s=self.config.fetch_timeout_s)
            except StoreUnavailableError as exc:
                log.warning("queue unavailable: %s", exc.message)
                sub = None
                self.stopping.wait(1.0)
                continue
            if claimed is None:
                continue
            if self.stopping.is_set():  # fetched while stopping: hand it back at once
                self._safe(_bound(self.queue.nak, claimed, 0.0))
                break
            try:
                self.handle(claimed)
            except Exception as exc:  # noqa: BLE001 - one bad claim must not stop the runner
                self.say(f"error handling delivery seq {claimed.stream_seq}: {type(exc).__name__}: {exc}")
                self._safe(_bound(self.queue.nak, claimed, policy.retry_delay()))
            self.handled += 1

    @staticmethod
    def _safe(fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the server went away: the ack wait redelivers
            log.warning("queue call failed: %s", exc)

    # -- one claim ----------------------------------------------------------------------------------
    def handle(self, c: Claimed) -> None:
        d = c.delivery
        tag = f"seq {c.stream_seq} delivery {c.attempt}/{self.queue.max_deliver}"
        if d is None:
            self.say(f"term {tag}: undecodable message ({c.undecodable})")
            self.queue.term(c)
            return
        self.say(f"claim run {d.run_id} {d.kind.value} {tag}")
        lease = Lease(self.queue, d.run_id, self.config.name)
        try:
            lease.acquire()
        except LeaseHeld as exc:
            # offered again once the lease can have expired: a holder that died is gone by then, a
            # live holder is executing the run and disposes of it (this is then a second copy)
            if c.attempt >= self.queue.max_deliver:
                self._dispose(c, d, Disposition(Verb.ACK, "lease_held"), detail=str(exc))
            else:
                self._dispose(c, d, Disposition(Verb.NAK, "lease_held", delay_s=self.queue.lease_ttl_s + 0.5),
                              detail=str(exc))
            return
        except StoreUnavailableError as exc:
            self._dispose(c, d, Disposition(Verb.NAK, "store_unavailable", delay_s=policy.retry_delay()),
                          detail=exc.message)
            return
        keepalive = _KeepAlive(self.queue, c)
        keepalive.start()
        try:
            self._claimed(c, d, lease)
        finally:
            keepalive.stop()
            lease.release()

    def _claimed(self, c: Claimed, d: Delivery, lease: Lease) -> None:
        store = FencedStore(self.store, lease)
        try:
            doc = self.store.load_run(d.run_id)
        except RunNotFoundError:
            self._dispose(c, d, Disposition(Verb.TERM, "unknown_run"), detail=f"no run {d.run_id} in the store")
            return
        except StoreUnavailableError as exc:
            self._dispose(c, d, Disposition(Verb.NAK, "store_unavailable", delay_s=policy.retry_delay()),
                          detail=exc.message)
            return
        claim = policy.on_claim(self.store, d, doc, attempt=c.attempt, rewound_at=_rewound_at(self.store, d.run_id))
        if claim.action is None:
            assert claim.drop is not None
            self._dispose(c, d, claim.drop, store=store)
            return
        token = CancelToken()
        control = self.queue.listen_control(d.run_id, lambda a, r: _control(self.store, d.run_id, a, r, token))
        lease_watch = threading.Thread(target=_cancel_on_lost, args=(lease, token), daemon=True)
        lease_watch.start()
        with self._lock:
            self._inflight[d.run_id] = InFlight(d.run_id, token, c)
        clone_dir = None
        try:
            try:
                result, clone_dir = self._execute(store, c, d, doc, claim.action, token)
            except LeaseLostError as exc:
                self.say(f"stop run {d.run_id}: {exc.message} (the new owner disposes of the delivery)")
                return
            except StoreUnavailableError as exc:
                self._dispose(c, d, Disposition(Verb.NAK, "store_unavailable", delay_s=policy.retry_delay()),
                              detail=exc.message)
                return
            except RepoMissingError as exc:  # the forge answered "no such repository/ref": every
                # later delivery would hear the same, so the run fails now and the message is gone
                from iterion.failure_codes import FailureCode

                message = exc.message or str(exc)
                self._fail_queued(store, d.run_id, message, code=FailureCode.REPO_NOT_FOUND.value)
                self._dispose(c, d, Disposition(Verb.TERM, "repo_not_found", event=ev.RUN_DELIVERY_DROPPED, payload={
                    "reason": "repo_not_found", "kind": d.kind.value, "delivery": d.msg_id,
                    "failure_code": FailureCode.REPO_NOT_FOUND.value, "message": message, "hint": exc.hint}),
                    store=store, detail=message)
                return
            except CloneError as exc:  # the forge may be back later: offered again, parked at the last
                if c.attempt < self.queue.max_deliver:
                    self._dispose(c, d, Disposition(Verb.NAK, "clone_failed", delay_s=policy.retry_delay()),
                                  detail=exc.message)
                else:  # the document is final before the decision is logged and the delivery parked
                    self._fail_queued(store, d.run_id, exc.message or str(exc))
                    self._dispose(c, d, Disposition(Verb.PARK, "clone_failed", event=ev.RUN_DLQ_PARKED, payload={
                        "deliveries": c.attempt, "max_deliver": self.queue.max_deliver, "error": exc.message}),
                        store=store, detail=exc.message, error=exc.message)
                return
            except UserError as exc:  # refused before executing (a changed source, a bad var, a clone)
                # final before the ack; a refusal carrying its own code (a sandbox that cannot start) keeps it
                self._fail_queued(store, d.run_id, exc.message or str(exc), getattr(exc, "failure_code", None))
                self._dispose(c, d, Disposition(Verb.ACK, "refused", event=ev.RUN_DELIVERY_DROPPED, payload={
                    "reason": "refused", "kind": d.kind.value, "delivery": d.msg_id,
                    "message": exc.message or str(exc), "hint": exc.hint}), store=store,
                    detail=exc.message or str(exc))
                return
            shutdown = self.stopping.is_set() and token.cancelled
            disp = policy.after_run(self.store, result, attempt=c.attempt, max_deliver=self.queue.max_deliver,
                                    shutdown=shutdown)
            if disp.verb is Verb.NAK and disp.reason == "shutdown":
                store.update_run(d.run_id, lambda x: x.options.__setitem__(policy.INTERRUPTED_OPTION, True))
            elif result.status not in (RunStatus.PAUSED_OPERATOR, RunStatus.CANCELLED) and \
                    self.store.load_run(d.run_id).options.get(policy.INTERRUPTED_OPTION):
                store.update_run(d.run_id, lambda x: x.options.pop(policy.INTERRUPTED_OPTION, None))
            detail = f"{result.status.value}" + (f" {result.failure_code}" if result.failure_code else "")
            self._dispose(c, d, disp, store=store, detail=detail, error=result.error)
        finally:
            self.queue.stop_listening(control)
            with self._lock:
                self._inflight.pop(d.run_id, None)
            lease_watch_stop(lease)
            if clone_dir is not None:
                from iterion.runner.clone import remove

                remove(clone_dir)

    def _exhausted_retried(self, seq: int, attempts: int = 3) -> None:
        """``_exhausted`` on its own thread. The advisory is consumed once handed over: an
        unexpected error (a server restarting mid-way, say) is logged and the handling tried
        again, a few times, rather than leaving its run `running` with no runner for good."""
        for attempt in range(attempts):
            try:
                self._exhausted(seq)
                return
            except Exception:  # noqa: BLE001 - logged; the next attempt starts from the queue's state
                log.exception("exhausted delivery seq %s (attempt %d of %d)", seq, attempt + 1, attempts)
                time.sleep(1.0 + attempt)

    def _exhausted(self, seq: int) -> None:
        """The last permitted delivery of message ``seq`` was never acknowledged (its runner died on
        it): park it on the dead-letter stream and mark the run DLQ_PARKED. Every runner hears the
        advisory; the message's deletion decides which one parks it (the others find it gone)."""
        from iterion.failure_codes import FailureCode

        reason = "the last permitted delivery was never acknowledged (its runner stopped)"
        try:
            d = self.queue.peek(seq)
            if d is None:
                return
            lease = Lease(self.queue, d.run_id, self.config.name)
            deadline = time.monotonic() + self.queue.lease_ttl_s + 2.0
            while True:  # its runner died on it: the lease expires within its TTL
                try:
                    lease.acquire()
                    break
                except LeaseHeld:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.25)
            if self.queue.take_exhausted(seq, reason) is None:  # another runner parked it
                lease.release()
                return
        except (LeaseHeld, StoreError) as exc:
            log.warning("exhausted delivery seq %s: %s", seq, exc)
            return
        try:
            def mark(doc: Any) -> None:
                if doc.status is RunStatus.RUNNING:  # its runner died on it: resumable from the checkpoint
                    doc.set_status(RunStatus.FAILED_RESUMABLE, failure_code=FailureCode.ORPHANED_RUN.value,
                                   error=reason)
            try:
                self.store.update_run(d.run_id, mark)  # then DLQ_PARKED over it (a bot's code is kept)
                disp = Disposition(Verb.PARK, "dlq", event=ev.RUN_DLQ_PARKED,
                                   payload={"deliveries": self.queue.max_deliver, "max_deliver": self.queue.max_deliver,
                                            "reason": reason})
                self.store.append_event(d.run_id, ev.RUN_DLQ_PARKED, payload=disp.payload)
                self._mark_parked(self.store, d.run_id, disp)
            except RunNotFoundError:
                return
            self.say(f"dead-letter run {d.run_id} (max deliveries: {reason}) seq {seq}")
        finally:
            lease.release()

    def _fail_queued(self, store: Any, run_id: str, message: str, code: str | None = None) -> None:
        """A queued run whose launch was refused (bad var, unclonable repository, no sandbox) ends
        failed, not queued forever (``code``: the failure code, else the run's own, else IR_UNLOADABLE)."""
        def mark(doc: Any) -> None:
            if doc.status is RunStatus.QUEUED:  # it never started: nothing to resume
                doc.set_status(RunStatus.FAILED, failure_code=code or doc.failure_code or "IR_UNLOADABLE",
                               error=message)
        try:
            store.update_run(run_id, mark)
        except Exception as exc:  # noqa: BLE001 - reported in the log; the delivery is gone either way
            log.warning("run %s: could not mark the refused launch failed: %s", run_id, exc)

    def _execute(self, store: Any, c: Claimed, d: Delivery, doc: Any, action: Action,
                 token: CancelToken) -> tuple[Any, Path | None]:
        from iterion.runner import clone as cl

        repo_url = d.repo_url
        work: cl.Clone | None = None
        clone_dir = None
        if repo_url:
            work = cl.fresh_clone(self.config.work_dir, d.run_id, repo_url, d.ref)
            clone_dir = work.path
        store.append_event(d.run_id, ev.RUN_DELIVERY_CLAIMED, payload={
            "delivery": d.msg_id, "kind": d.kind.value, "action": action.value, "runner": self.config.name,
            "host": socket.gethostname(), "attempt": c.attempt, "max_deliver": self.queue.max_deliver,
            "repo_url": repo_url, "ref": d.ref, "base": work.base if work else None})
        if action is Action.TAKEOVER:
            self._promote(store, d.run_id)
        if work is not None and action is not Action.LAUNCH:
            cl.reset_and_restore(store, d.run_id, work)
            store.update_run(d.run_id, lambda x: setattr(x, "workspace_dir", str(work.path)))
        try:
            if action is Action.LAUNCH:
                return self._launch(store, d, work, token), clone_dir
            return self._resume(store, d, work, token), clone_dir
        except BaseException:
            if clone_dir is not None:
                cl.remove(clone_dir)
            raise

    def _promote(self, store: Any, run_id: str) -> None:
        """A `running` run whose runner lost its lease (died): promote it so resume continues it."""
        reason = "its runner stopped renewing the run's lease (the runner died or lost the queue)"

        def mark(doc: Any) -> None:
            if doc.status is RunStatus.RUNNING:
                doc.set_status(RunStatus.FAILED_RESUMABLE, failure_code="ORPHANED_RUN", error=reason)
        store.update_run(run_id, mark)
        store.append_event(run_id, ev.RUN_ORPHAN_PROMOTED, payload={
            "status": RunStatus.FAILED_RESUMABLE.value, "reason": reason, "by": "queue_runner"})

    def _launch(self, store: Any, d: Delivery, work: Any, token: CancelToken) -> Any:
        from iterion.engine.launch import launch_run
        from iterion.engine.source import compile_source
        from iterion.requests import human_nodes

        req = d.launch_request()  # the very request the server parsed (iterion.requests)
        file, workspace = self._paths(d, work)
        compiled = compile_source(file)  # flat answers go to its one human node
        options = req.launch_options(
            human_nodes(compiled),
            script_file=str(workspace / req.script) if (req.script and work) else req.script, workspace=workspace,
            # a local workspace serves one run at a time: a slot waits for it (a clone is never shared)
            wait_workspace=work is None, watch=False, run_id=d.run_id, adopt_queued=True,
            push_checkpoints="origin" if work is not None else None,
            push_every=self.config.push_every if work is not None else None)
        return launch_run(store, file, options, token=token, compiled=compiled)

    def _resume(self, store: Any, d: Delivery, work: Any, token: CancelToken) -> Any:
        from iterion.engine.resume import resume_run

        req = d.resume_request()
        file = self._paths(d, work)[0] if work is not None else None
        options = req.resume_options(req.answers_for_run(store, d.run_id), file=file, wait_workspace=work is None,
                                     watch=False)
        return resume_run(store, d.run_id, options, token=token)

    @staticmethod
    def _paths(d: Delivery, work: Any) -> tuple[Path, Path]:
        if work is None:
            if not d.file:
                raise UserError("the delivery names no workflow file", exit_code=ErrorKind.BAD_INPUT)
            f = Path(d.file)
            return f, Path(d.workspace) if d.workspace else f.parent
        if not d.file:
            raise UserError("a repository delivery must name the workflow's path in the repository", exit_code=ErrorKind.BAD_INPUT)
        target = (work.path / d.file).resolve()
        if not target.is_relative_to(work.path.resolve()):
            raise UserError(f"--file {d.file} is outside the repository", exit_code=ErrorKind.BAD_INPUT)
        return target, work.path

    # -- disposition --------------------------------------------------------------------------------
    def _dispose(self, c: Claimed, d: Delivery, disp: Disposition, *, store: Any = None,
                 detail: str = "", error: str | None = None) -> None:
        if disp.event and store is not None:
            try:
                store.append_event(d.run_id, disp.event, payload=disp.payload)
            except Exception as exc:  # noqa: BLE001 - the decision stands even if its event is lost
                log.warning("run %s: event %s not recorded: %s", d.run_id, disp.event, exc)
        if disp.verb is Verb.PARK and store is not None:
            self._mark_parked(store, d.run_id, disp)
        what = {Verb.ACK: "ack", Verb.NAK: f"nak +{disp.delay_s:g}s", Verb.TERM: "term",
                Verb.PARK: "dead-letter"}[disp.verb]
        self.say(f"{what} run {d.run_id} ({disp.reason}{': ' + detail if detail else ''}) "
                 f"delivery {c.attempt}/{self.queue.max_deliver}")
        if disp.verb is Verb.ACK:
            self._safe(lambda: self.queue.ack(c))
        elif disp.verb is Verb.NAK:
            self._safe(lambda: self.queue.nak(c, disp.delay_s))
        elif disp.verb is Verb.TERM:
            self._safe(lambda: self.queue.term(c))
        else:
            self._safe(lambda: self.queue.park(c, f"{disp.reason}: {error or detail}"))

    @staticmethod
    def _mark_parked(store: Any, run_id: str, disp: Disposition) -> None:
        from iterion.failure_codes import FailureCode, is_reserved

        def mark(doc: Any) -> None:
            # a bot-defined code is the run's own diagnosis: never overwritten by the park
            if doc.failure_code and not is_reserved(doc.failure_code):
                return
            previous = doc.failure_code
            doc.failure_code = FailureCode.DLQ_PARKED.value
            doc.error = (f"every permitted delivery failed (last: {previous}: {doc.error})"
                         if previous else "every permitted delivery failed")
        store.update_run(run_id, mark)


class _KeepAlive:
    """In-progress acks every ack_wait / 3 while the claim is handled."""

    def __init__(self, queue: WorkQueue, c: Claimed) -> None:
        self.queue, self.c = queue, c
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True, name="keepalive")

    def start(self) -> None:
        self._t.start()

    def _loop(self) -> None:
        period = max(self.queue.ack_wait_s / 3.0, 0.05)
        while not self._stop.wait(period):
            try:
                self.queue.in_progress(self.c)
            except Exception as exc:  # noqa: BLE001 - a blip: the next one may pass
                log.warning("in-progress ack failed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(5)


def _bound(fn: Callable[[Claimed, float], None], c: Claimed, delay: float) -> Callable[[], None]:
    return lambda: fn(c, delay)


def _control(store: Store, run_id: str, action: str, reason: str, token: CancelToken) -> None:
    """A cancel/pause from the run's control subject becomes the engine's own control request."""
    from iterion.engine.control import Action as CtlAction
    from iterion.engine.control import write_request

    act = CtlAction(action)
    write_request(store, run_id, act, reason)
    if act is CtlAction.CANCEL:
        token.cancel(reason)


def _cancel_on_lost(lease: Lease, token: CancelToken) -> None:
    while not lease._stop.is_set():  # noqa: SLF001 - the lease's own lifetime
        if lease.lost.wait(0.2):
            token.cancel(f"lease lost: {lease.lost_reason}")
            return


def lease_watch_stop(lease: Lease) -> None:
    lease._stop.set()  # noqa: SLF001 - ends _cancel_on_lost


def _rewound_at(store: Store, run_id: str) -> datetime | None:
    last = None
    for e in store.read_events(run_id):
        if e.type == ev.RUN_REWOUND:
            last = e.time
    return last
