"""The main loop: execute the node at the checkpoint, pick its edge, checkpoint, repeat.

Per node: ``pre:`` (or ``resume:`` for the first node of a resumed run) -> execute ->
``nodes:`` -> checkpoint anchored on the next node. A failure writes ``fail:`` and goes to the
recovery dispatcher (``recovery.py``: retry in the run, or a recovery pause for a person); when it
declines, the run parks ``failed_resumable`` anchored at the failing node; a cancel does the
same as ``cancelled``; a human gate writes ``pause:`` and parks ``paused_waiting_human``. Fan-out branches run in
threads and the checkpoint is written once they converge (one entry per node id).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from iterion.budget import BudgetExceeded, DailyCapReached
from iterion.builtins.vault import scrub, scrub_model
from iterion.engine.context import ExecContext, NodeCall, render_text
from iterion.engine.control import Action as ControlAction
from iterion.engine.control import clear_request, park_operator, pause_point, read_request
from iterion.engine.dailycap import pause_payload
from iterion.engine.declared import with_value
from iterion.engine.edges import note_loop_output, select_edge, take_edge, warner
from iterion.engine.errors import (
    Cancelled,
    CheckpointLost,
    ChildPaused,
    NodeFailure,
    OperatorPause,
    RecoveryPause,
)
from iterion.engine.fanout_safety import branch_bodies, refuse_mutating_branches
from iterion.engine.fork import record_turn
from iterion.engine.nodes import executor_for
from iterion.engine.recovery import Action, RecoveryDispatcher, park_recovery
from iterion.engine.result import RunResult
from iterion.engine.scope import build_scope
from iterion.engine.state import Pending, to_checkpoint
from iterion.engine.stop import Ask, Emit, Lost, Mark, Stop, lost, park_on_storage, stop_run
from iterion.engine.storage import storage_failure, storage_oserror
from iterion.engine.versioning import capture_skipped_payload
from iterion.engine.worktree import needs_workspace
from iterion.failure_codes import FailureCode
from iterion.ir import DONE, FAIL, TERMINALS, AwaitMode, Edge, Node, NodeKind, RouterMode
from iterion.store import AnchorReason, RunStatus
from iterion.store import events as ev
from iterion.store.checkpoint import InteractionKind


@dataclass
class StepOutcome:
    output: dict[str, Any]
    edges: list[Edge] = field(default_factory=list)
    mapped: dict[int, dict[str, Any]] = field(default_factory=dict)  # edge index -> rendered `with {}`
    pause: dict[str, Any] | None = None
    pause_kind: InteractionKind = "human"


# called when the run finishes (worktree finalisation); returns fields for the RunResult
FinishHook = Callable[[ExecContext], dict[str, Any]]


def _deliberate(result: RunResult, code: str) -> RunResult:
    """A fail node's refusal that landed as such (not turned into CHECKPOINT_LOST by a failed
    write): marked deliberate, the sentinel the queue runner acks on whatever the code."""
    result.deliberate = result.failure_code == code
    return result


class Runner:
    def __init__(self, ctx: ExecContext, *, on_finish: FinishHook | None = None) -> None:
        self.ctx = ctx
        self.wf = ctx.workflow
        self.state = ctx.state
        self.on_finish = on_finish
        self._fail_written: set[tuple[str, int]] = set()
        self._current_it: int | None = None  # iteration of the node the main loop is executing
        self.storage_error: OSError | None = None  # a full/read-only disk met by a checkpoint write
        self.recovery = RecoveryDispatcher(ctx)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, *, resumed: bool = False, answers: dict[str, Any] | None = None) -> RunResult:
        st = self.state
        first = resumed
        current: str | None = st.next_node
        try:
            while True:
                nid = st.next_node
                current = nid
                if nid is None or nid == DONE:
                    return self._finished()
                if nid == FAIL:
                    return self._builtin_fail()
                node = self.wf.nodes.get(nid)
                if node is None:
                    raise NodeFailure(FailureCode.IR_UNLOADABLE,
                                      f"the checkpoint restarts at node {nid}, which the workflow no longer declares",
                                      node=nid)
                if node.kind is NodeKind.FAIL:
                    return self._fail_node(node)
                self.ctx.token.check()
                pause_point(self.ctx)  # an operator pause takes effect here, at a node boundary
                # the first node of a resume carries the checkpoint's iteration (a rewind may have
                # moved it); afterwards each node's next iteration is its completed-execution count
                it = st.next_iteration if first else st.iteration_of(nid)
                self._current_it = it
                pending = st.pending if (first and st.pending is not None and st.pending.node == nid) else None
                if pending is not None and pending.kind == "recovery":
                    # the acknowledgement is the audit trail of what was fixed, never the node's output
                    if answers:
                        self._answered(pending, answers)
                    st.pending = pending = None
                record_turn(self.ctx, node, it)  # an LLM node's turn checkpoint: what `iterion fork` starts from
                outcome = self._attempt(nid, it, resumed=first, answers=answers if pending else None,
                                        pending=pending)
                first = False
                if outcome.pause is not None:
                    return self._park(node, it, outcome)
                self._current_it = None  # completed: a later anchor on it is its NEXT iteration
                if pending is not None:
                    self._answered(pending, answers or {})
                self._advance(node, outcome)
                if st.next_node != DONE:  # reaching done checkpoints in _finished
                    self.checkpoint(AnchorReason.NODE_BOUNDARY, st.next_node)
        except Cancelled as exc:
            return self._cancelled(current, exc)
        except OperatorPause as exc:
            return park_operator(self, exc)
        except DailyCapReached as exc:
            return self._daily_capped(current, exc)
        except ChildPaused as exc:
            return self._child_paused(current, exc)
        except RecoveryPause as exc:
            return park_recovery(self, exc)
        except CheckpointLost:
            return lost(self, None, "the run could not continue")
        except NodeFailure as exc:
            return self._failed(current, exc)
        except OSError as exc:  # a write outside a node failed: a full/read-only disk parks resumable
            self.storage_error = storage_oserror(exc)
            parked = park_on_storage(self, None, str(exc)) if self.storage_error else None
            if parked is None:
                raise
            return parked

    # -- one node ---------------------------------------------------------------------------------
    def _attempt(self, nid: str, it: int, *, resumed: bool = False, answers: dict[str, Any] | None = None,
                 pending: Pending | None = None, can_pause: bool = True) -> StepOutcome:
        """``step``, with the recovery dispatcher consulted on a failure BEFORE any final status is
        written: retried here (re-entered through a ``resume:`` boundary), parked for a person
        (RecoveryPause), or raised to the failure path."""
        while True:
            try:
                return self.step(nid, it, resumed=resumed, answers=answers, pending=pending)
            except NodeFailure as exc:
                decision = self.recovery.on_failure(self.wf.nodes[nid], it, exc, can_pause=can_pause)
                if decision.action is Action.PAUSE:
                    raise RecoveryPause(exc, nid, it, decision) from exc
                if decision.action is not Action.RETRY:
                    raise
            self.recovery.wait(decision)
            self._fail_written.discard((nid, it))  # a failed retry writes its own fail: boundary
            resumed = True

    def step(self, nid: str, it: int, *, resumed: bool = False, answers: dict[str, Any] | None = None,
             pending: Pending | None = None) -> StepOutcome:
        ctx, st, wf = self.ctx, self.state, self.wf
        node = wf.nodes[nid]
        ctx.token.check()  # a cancelled run writes no further boundary (a branch thread gets here too)
        if needs_workspace(node):  # a lazily created worktree is made before its first such node
            try:
                ctx.versioning.ensure_workspace()
            except Exception as exc:  # noqa: BLE001 - reported as the node's failure
                raise storage_failure(exc, "the run's worktree could not be created", nid) or NodeFailure(
                    FailureCode.EXECUTION_FAILED, f"the run's worktree could not be created: "
                    f"{getattr(exc, 'message', None) or exc}", node=nid) from exc
        if resumed:
            self.boundary(BoundaryKind.RESUME, nid, it)
            pre = BoundaryLabel(BoundaryKind.PRE, nid, it)
            if not ctx.versioning.has(pre):
                # the anchor a rewind to this node restores: what it (re)started from
                self.boundary(BoundaryKind.PRE, nid, it)
        else:
            self.boundary(BoundaryKind.PRE, nid, it)
        ctx.emit(ev.NODE_STARTED, nid, it, {"kind": node.kind.value, "resumed": resumed})
        with st.lock:
            node_input = dict(st.inputs.get(nid, {}))
            if nid == wf.entry:
                # "the entry node's input is the run's vars" (docs/language.md 2), its with values on top
                node_input = {**st.vars, **node_input}
        scope = build_scope(wf, st, input=node_input, attachments=ctx.attachments,
                            history_nodes=ctx.in_cycles)
        call = NodeCall(node, it, node_input, scope, answers=answers, pending=pending)
        try:
            ctx.token.check()
            try:
                ctx.budget.add_iteration()
                ctx.budget.check()
            except BudgetExceeded as exc:
                ctx.emit(ev.BUDGET_EXCEEDED, nid, it, {"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed})
                raise NodeFailure(FailureCode.BUDGET_EXCEEDED, exc.message, node=nid,
                                  details={"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed}) from None
            with ctx.budget.active():
                result = executor_for(node.kind)(ctx, call)
            ctx.token.check()
            if result.pause is not None:
                return StepOutcome({}, pause=result.pause, pause_kind=result.pause_kind)
            output = result.output
            # edges are chosen with the new output visible, before anything is committed
            scope_after = dict(scope)
            scope_after["outputs"] = {**scope["outputs"], nid: output}
            edges = result.selected if result.selected is not None else [
                select_edge(wf, nid, output, scope_after, st, warn=warner(ctx.emit, nid, it))]
            mapped = {e.index: {key: with_value(tpl, scope_after, output, e.src, f"with {key} on edge {e.src} -> {e.dst}")
                                for key, tpl in e.with_map} for e in edges if e.with_map}
            self._commit(node, it, output)
            self.boundary(BoundaryKind.NODES, nid, it)
            usage = ctx.budget.usage()
            ctx.emit(ev.NODE_FINISHED, nid, it, {"kind": node.kind.value, "output": _preview(output),
                                                 "tokens": usage.tokens, "cost_usd": usage.cost_usd})
            return StepOutcome(output, edges, mapped)
        except Cancelled:
            self.fail_boundary(nid, it)
            ctx.emit(ev.NODE_FAILED, nid, it, {"code": FailureCode.CANCELLED.value, "error": "cancelled"})
            raise
        except (DailyCapReached, ChildPaused):  # interrupted (a charge point, a paused child): re-executed on resume
            # a pause, not a failure (the spec's paused_operator is "a soft pause or daily-spend-cap
            # pause"): its fail: boundary, then only run_paused, as an operator pause (_daily_capped)
            self.fail_boundary(nid, it)
            raise
        except NodeFailure as exc:
            exc.node = exc.node or nid
            self.fail_boundary(nid, it)
            ctx.emit(ev.NODE_FAILED, nid, it, {"code": exc.code, "error": exc.message, **exc.details})
            raise
        except Exception as exc:  # noqa: BLE001 - an unexpected error is still a typed node failure
            failure = storage_failure(exc, f"node {nid}", nid) or NodeFailure(
                FailureCode.EXECUTION_FAILED, f"node {nid}: {type(exc).__name__}: {exc}", node=nid)
            self.fail_boundary(nid, it)
            ctx.emit(ev.NODE_FAILED, nid, it, {"code": failure.code, "error": failure.message})
            raise failure from exc

    def _render_with(self, edge: Edge, scope: dict[str, Any]) -> dict[str, Any]:
        return {key: render_text(tpl, scope, edge.src, f"with {key} on edge {edge.src} -> {edge.dst}", "with")
                for key, tpl in edge.with_map}

    def _commit(self, node: Node, it: int, output: dict[str, Any]) -> None:
        st, ctx = self.state, self.ctx
        st.record_output(node.id, it, output, in_loop=node.id in ctx.in_cycles)
        note_loop_output(self.wf, node.id, output, st)
        if node.publish:
            doc = ctx.store.artifacts(ctx.run_id).publish(node.publish, scrub(ctx.run_dir, output), node=node.id,
                                                          iteration=it)
            with st.lock:
                st.artifact_versions[node.publish] = doc.version
                st.artifact_values[node.publish] = output
            ctx.emit(ev.ARTIFACT_PUBLISHED, node.id, it, {"name": node.publish, "version": doc.version})

    def _take(self, edge: Edge, outcome: StepOutcome) -> None:
        st, ctx = self.state, self.ctx
        take_edge(edge, st, outcome.output, self.wf)
        if edge.loop is not None:
            ctx.emit(ev.LOOP_ITERATION, edge.src, None, {"loop": edge.loop, "iteration": st.loop(edge.loop).iteration,
                                                          "max": edge.loop_max})
        mapped = outcome.mapped.get(edge.index)
        if mapped is not None and edge.dst not in TERMINALS:
            with st.lock:
                st.inputs.setdefault(edge.dst, {}).update(mapped)
        ctx.emit(ev.EDGE_SELECTED, edge.src, None, {"to": edge.dst, "edge": edge.index})

    def _advance(self, node: Node, outcome: StepOutcome) -> None:
        st = self.state
        if self._is_fan_out(node, outcome.edges):
            join = self._fan_out(node, outcome)
            st.came_from = None  # several branches converged: no single predecessor
            st.next_node = join or DONE
        else:
            edge = outcome.edges[0]
            self._take(edge, outcome)
            st.came_from = node.id
            st.next_node = edge.dst
        st.next_iteration = st.iteration_of(st.next_node) if st.next_node else 0

    def _is_fan_out(self, node: Node, edges: list[Edge]) -> bool:
        return len(edges) > 1 or (node.kind is NodeKind.ROUTER and node.mode is RouterMode.FAN_OUT_ALL)

    # -- fan-out ----------------------------------------------------------------------------------
    def _fan_out(self, router: Node, outcome: StepOutcome) -> str | None:
        ctx, wf = self.ctx, self.wf
        edges = outcome.edges
        region = wf.fan_out_regions.get(router.id)
        join = region.join if region is not None else self._common_join(router, edges)
        join_node = wf.nodes.get(join) if join else None
        mode = (join_node.await_mode if join_node is not None else None) or AwaitMode.WAIT_ALL
        targets = [e.dst for e in edges]
        # refused before any branch runs (docs/language.md §3, Fan-out)
        refuse_mutating_branches(wf, router.id, targets, branch_bodies(wf, router.id, targets, join))
        cap = ctx.budget.ask.max_parallel_branches or len(edges)
        failures: list[tuple[Edge, NodeFailure]] = []
        cancelled = False
        capped: DailyCapReached | ChildPaused | None = None
        with cf.ThreadPoolExecutor(max_workers=max(1, min(cap, len(edges))), thread_name_prefix="iterion-branch") as pool:
            futures = {pool.submit(self._branch, router.id, i, e, outcome, join): e for i, e in enumerate(edges)}
            pending = set(futures)
            while pending:
                _done, pending = cf.wait(pending, timeout=0.1)
                if ctx.token.cancelled and not cancelled:
                    cancelled = True
                    for fut in pending:  # branches still queued (max_parallel_branches) never start
                        fut.cancel()
            for fut, edge in futures.items():
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if isinstance(exc, Cancelled):
                    cancelled = True
                elif isinstance(exc, (DailyCapReached, ChildPaused)):
                    capped = capped or exc
                elif isinstance(exc, NodeFailure):
                    failures.append((edge, exc))
                elif exc is not None:
                    failures.append((edge, NodeFailure(FailureCode.EXECUTION_FAILED, f"branch -> {edge.dst}: {exc}")))
        if cancelled or ctx.token.cancelled:
            raise Cancelled(ctx.token.reason or "cancelled")
        if capped is not None:  # the whole fan-out re-executes on resume, as after a cancel
            raise capped
        if failures:
            if mode is AwaitMode.BEST_EFFORT and len(failures) < len(edges):
                for edge, f in failures:
                    ctx.emit(ev.WARNING, router.id, None, {"message": f"branch -> {edge.dst} failed and was dropped "
                                                                     f"(await: best_effort): {f.message}",
                                                          "code": f.code})
            else:
                edge, f = failures[0]
                raise NodeFailure(f.code, f"fan-out {router.id}: branch -> {edge.dst} failed: {f.message}",
                                  node=router.id, details={"branch": edge.dst, "failed_branches": len(failures)})
        return join

    def _common_join(self, router: Node, edges: list[Edge]) -> str | None:
        """For an llm router that picked several targets: their convergence node (the rule's one
        home, iterion.dsl.convergence)."""
        from iterion.dsl.convergence import Convergence

        return Convergence(self.wf).of_targets(router.id, [e.dst for e in edges])

    def _branch(self, router: str, index: int, edge: Edge, outcome: StepOutcome, join: str | None) -> None:
        # concurrency is bounded by the fan-out's pool (max_parallel_branches); a shared slot
        # semaphore would deadlock a nested fan-out whose outer branch holds the last slot
        ctx, st, wf = self.ctx, self.state, self.wf
        ctx.token.check()  # a cancelled run starts no branch
        # `join`: where this branch stops, the convergence node (iterion.dsl.convergence)
        ctx.emit(ev.BRANCH_STARTED, router, None, {"branch": index, "to": edge.dst, "join": join})
        try:
            self._take(edge, outcome)
            nid = edge.dst
            while nid != join and nid not in TERMINALS:
                ctx.token.check()  # between a branch's nodes, as between the main loop's
                node = wf.nodes[nid]
                if node.kind is NodeKind.FAIL:
                    # inside a branch a fail node is the branch's diagnosis; the collector decides
                    scope = build_scope(wf, st, input=st.inputs.get(nid, {}), attachments=ctx.attachments,
                                        history_nodes=ctx.in_cycles)
                    message = _render_lenient(node.message, scope) or f"fail node {nid} reached"
                    raise NodeFailure(node.code or FailureCode.WORKFLOW_FAILED, message, node=nid)
                it = st.iteration_of(nid)
                out = self._attempt(nid, it, can_pause=False)
                if out.pause is not None:
                    self.fail_boundary(nid, it)
                    raise NodeFailure(FailureCode.EXECUTION_FAILED,
                                      f"node {nid} asked for a person inside a fan-out branch, which cannot pause",
                                      node=nid)
                if self._is_fan_out(node, out.edges):
                    nid = self._fan_out(node, out) or DONE
                    continue
                nxt = out.edges[0]
                self._take(nxt, out)
                nid = nxt.dst
            if nid == FAIL:
                raise NodeFailure(FailureCode.WORKFLOW_FAILED, f"branch -> {edge.dst} reached the fail terminal")
        except NodeFailure as exc:
            ctx.emit(ev.BRANCH_FAILED, router, None, {"branch": index, "to": edge.dst, "code": exc.code,
                                                      "error": exc.message})
            raise
        ctx.emit(ev.BRANCH_FINISHED, router, None, {"branch": index, "to": edge.dst})

    # -- boundaries and checkpoints ---------------------------------------------------------------
    def boundary(self, kind: BoundaryKind, node: str, it: int) -> None:
        label = BoundaryLabel(kind, node, it)
        try:
            mark = self.ctx.versioning.mark(label)
        except Exception as exc:  # noqa: BLE001 - reported as the node's failure
            what = f"workspace boundary {label} could not be written"
            raise storage_failure(exc, what, node) or NodeFailure(
                FailureCode.EXECUTION_FAILED, f"{what}: {exc}", node=node) from exc
        self.ctx.emit(ev.BOUNDARY_WRITTEN, node, it, {"label": str(label), "state": mark.state,
                                                      "mechanism": self.ctx.versioning.mechanism})
        if self.ctx.checkpoints is not None:  # --push-every N: a push every N completed nodes
            self.ctx.checkpoints.after_boundary(label)
        skipped = self.ctx.versioning.capture_skipped()
        if skipped:
            self.ctx.emit(ev.WORKSPACE_CAPTURE_SKIPPED, node, it, capture_skipped_payload(
                str(label), skipped, self.ctx.versioning.size_cap))

    def fail_boundary(self, node: str, it: int) -> None:
        """Best effort: the node did not complete (never masks the failure being reported)."""
        if (node, it) in self._fail_written:
            return
        self._fail_written.add((node, it))
        try:
            self.boundary(BoundaryKind.FAIL, node, it)
        except NodeFailure as exc:
            self.ctx.emit(ev.WARNING, node, it, {"message": exc.message})

    def _anchor_iteration(self, node: str | None) -> int:
        """The iteration a restart at ``node`` carries: the one it was executing, else its next."""
        if not node or node in TERMINALS:
            return 0
        if node == self.state.next_node and self._current_it is not None:
            return self._current_it
        return self.state.iteration_of(node)

    def checkpoint(self, anchor: AnchorReason, restart: str | None, *, strict: bool = True,
                   recovery_code: str | None = None, iteration: int | None = None) -> bool:
        """The checkpoint anchored on ``restart`` at ``iteration`` (default: ``_anchor_iteration``).
        A failed write is a ``checkpoint_lost`` event, then ``CheckpointLost`` when ``strict``,
        else False (the caller's stop decides: iterion.engine.stop)."""
        ctx, st = self.ctx, self.state
        restart_it = self._anchor_iteration(restart) if iteration is None else iteration
        try:
            cp = scrub_model(ctx.run_dir, to_checkpoint(
                st, usage=ctx.budget.usage(), anchor=anchor, restart_node=restart,
                restart_iteration=restart_it, recovery_code=recovery_code))
            ctx.store.save_checkpoint(ctx.run_id, cp)
        except Exception as exc:  # noqa: BLE001 - a lost checkpoint ends the run as failed
            self.storage_error = storage_oserror(exc) or self.storage_error
            cause = f"{type(exc).__name__}: {exc}"
            ctx.emit(ev.CHECKPOINT_LOST, restart, None, {"error": cause, "anchor": anchor.value})
            if strict:
                raise CheckpointLost(cause) from exc
            return False
        ctx.emit(ev.CHECKPOINT_WRITTEN, restart, restart_it, {"restart_node": restart, "anchor": anchor.value})
        return True

    # -- how a run stops (the order of every stop: iterion.engine.stop) ----------------------------
    def _finished(self) -> RunResult:
        self.state.next_node = None
        on_finish, ctx = self.on_finish, self.ctx
        outputs = list(self.state.outputs)
        return stop_run(self, Stop(
            RunStatus.FINISHED, anchor=AnchorReason.NODE_BOUNDARY, restart=None,
            finalize=(lambda: on_finish(ctx)) if on_finish else (lambda: {}),
            events=lambda c: [Emit(ev.RUN_FINISHED, None, None, {**c.finalized, "outputs": outputs})]))

    def _builtin_fail(self) -> RunResult:
        st = self.state
        pred = st.came_from
        error = f"the workflow reached the fail terminal (from node {pred})" if pred else "the workflow reached fail"
        code = FailureCode.WORKFLOW_FAILED.value
        # the checkpoint is kept (anchored on the node that routed here) so a rewind can recover it
        return _deliberate(stop_run(self, Stop(
            RunStatus.FAILED, code, error,
            mark=Mark(BoundaryKind.FAIL, pred or FAIL, st.iteration_of(pred) - 1 if pred else 0),
            anchor=AnchorReason.NODE_BOUNDARY, restart=pred,
            events=lambda _: [Emit(ev.RUN_FAILED, pred, None, {"code": code, "error": error})])), code)

    def _fail_node(self, node: Node) -> RunResult:
        ctx, st, wf = self.ctx, self.state, self.wf
        it = st.iteration_of(node.id)
        scope = build_scope(wf, st, input=st.inputs.get(node.id, {}), attachments=ctx.attachments,
                            history_nodes=ctx.in_cycles)
        message = _render_lenient(node.message, scope) or f"fail node {node.id} reached"
        code = node.code or FailureCode.WORKFLOW_FAILED.value
        pred = st.came_from
        ctx.emit(ev.NODE_STARTED, node.id, it, {"kind": node.kind.value})
        st.record_output(node.id, it, {"code": code, "message": message}, in_loop=node.id in ctx.in_cycles)
        self.fail_boundary(node.id, it)
        ctx.emit(ev.NODE_FAILED, node.id, it, {"code": code, "error": message, "fail_node": True})
        reason = None
        if node.id == wf.entry:
            reason = "it is the workflow entry, so no guard precedes it"
        elif pred is None:
            reason = "several branches converged on it, so no single guard owns the refusal"
        if node.resumable and reason is None and pred is not None:
            # anchored on the GUARD: the resume re-evaluates it (against raised caps) instead of
            # re-dispatching this node and reproducing the same outcome
            st.came_from = None
            return _deliberate(stop_run(self, Stop(
                RunStatus.FAILED_RESUMABLE, code, message, anchor=AnchorReason.RESUMABLE_FAIL, restart=pred,
                lost=Lost(code, message),
                events=lambda _: [Emit(ev.RUN_FAILED, node.id, it, {"code": code, "error": message,
                                                                    "resumable": True, "restart_node": pred})])),
                code)
        if node.resumable and reason is not None:
            ctx.emit(ev.WARNING, node.id, it, {"message": f"fail node {node.id} is resumable but cannot be resumed: "
                                                          f"{reason}; the run ends failed", "node": node.id,
                                               "reason": reason})
        return _deliberate(stop_run(self, Stop(
            RunStatus.FAILED, code, message, anchor=AnchorReason.NODE_BOUNDARY, restart=pred,
            events=lambda _: [Emit(ev.RUN_FAILED, node.id, it, {"code": code, "error": message,
                                                                "resumable": False})])), code)

    def _park(self, node: Node, it: int, outcome: StepOutcome) -> RunResult:
        st = self.state
        questions = outcome.pause or {}
        previous = st.pending.interaction_id if st.pending is not None and st.pending.node == node.id else None
        kind = ev.ASK_USER_REQUESTED if outcome.pause_kind == "ask_user" else ev.HUMAN_INPUT_REQUESTED
        return stop_run(self, Stop(
            RunStatus.PAUSED_WAITING_HUMAN, mark=Mark(BoundaryKind.PAUSE, node.id, it),
            ask=Ask(node.id, it, outcome.pause_kind, questions, reuse=previous),
            anchor=AnchorReason.HUMAN_PAUSE, restart=node.id, lost=Lost(None, f"node {node.id} asked for input"),
            events=lambda c: [Emit(kind, node.id, it, {"interaction_id": c.interaction_id, "questions": questions}),
                              Emit(ev.RUN_PAUSED, node.id, it, {"interaction_id": c.interaction_id})]))

    def _answered(self, pending: Pending, answers: dict[str, Any]) -> None:
        ctx = self.ctx
        try:
            ctx.store.interactions(ctx.run_id).answer(pending.interaction_id, answers)
        except Exception as exc:  # noqa: BLE001 - the audit record must not undo an accepted answer
            ctx.emit(ev.WARNING, pending.node, pending.iteration, {"message": f"answer not recorded: {exc}"})
        ctx.emit(ev.HUMAN_INPUT_RECEIVED, pending.node, pending.iteration,
                 {"interaction_id": pending.interaction_id, "answers": answers})
        self.state.pending = None

    def _failed(self, current: str | None, exc: NodeFailure) -> RunResult:
        anchor = current if current and current not in TERMINALS else exc.node
        it = self._anchor_iteration(anchor)
        return stop_run(self, Stop(
            RunStatus.FAILED_RESUMABLE, exc.code, exc.message,
            mark=Mark(BoundaryKind.FAIL, anchor, it) if anchor and anchor in self.wf.nodes else None,
            anchor=AnchorReason.FAILURE, restart=anchor, lost=Lost(exc.code, exc.message),
            events=lambda _: [Emit(ev.RUN_FAILED, anchor, it if anchor else None,
                                   {"code": exc.code, "error": exc.message, "resumable": True,
                                    "restart_node": anchor})]))

    def _cancelled(self, current: str | None, exc: Cancelled) -> RunResult:
        anchor = current if current and current not in TERMINALS else None
        code = FailureCode.CANCELLED.value
        return stop_run(self, Stop(
            RunStatus.CANCELLED, code, exc.reason,
            mark=Mark(BoundaryKind.FAIL, anchor, self._anchor_iteration(anchor)) if anchor else None,
            anchor=AnchorReason.CANCEL, restart=anchor, lost=Lost(code, exc.reason),
            events=lambda _: [Emit(ev.RUN_CANCELLED, anchor, None, {"reason": exc.reason, "restart_node": anchor})]))

    def _daily_capped(self, current: str | None, exc: DailyCapReached) -> RunResult:
        """Park ``paused_operator`` at the charge point that reached the store's daily cap
        (iterion/engine/dailycap.py)."""
        return self._park_interrupted(current, exc.message, lambda anchor: pause_payload(exc, anchor))

    def _child_paused(self, current: str | None, exc: ChildPaused) -> RunResult:
        """Park ``paused_operator`` because a subbot's child was paused by an operator; the resume
        resumes the same child (engine/nodes/subbot.py)."""

        def honoured() -> dict[str, Any]:  # a pause of this run, relayed to the child, is done
            req = read_request(self.ctx.store, self.ctx.run_id)
            if req is not None and req.action is ControlAction.PAUSE:
                clear_request(self.ctx.store, self.ctx.run_id)
            return {}

        return self._park_interrupted(
            current, exc.message, lambda anchor: {"reason": exc.message, "by": "subbot", "restart_node": anchor,
                                                  "child_run": exc.child_run, "subbot_node": exc.node},
            finalize=honoured)

    def _park_interrupted(self, current: str | None, message: str,
                          payload: Callable[[str | None], dict[str, Any]],
                          finalize: Callable[[], dict[str, Any]] | None = None) -> RunResult:
        """Park ``paused_operator`` with the node in progress interrupted (its ``fail:`` boundary
        written, as a cancel) and re-executed on resume; ``run_paused`` names that node and
        iteration, as an operator pause's, so the timeline shows that execution paused."""
        anchor = current if current and current not in TERMINALS else None
        it = self._anchor_iteration(anchor) if anchor else None
        return stop_run(self, Stop(
            RunStatus.PAUSED_OPERATOR, None, message,
            mark=Mark(BoundaryKind.FAIL, anchor, it) if anchor and it is not None else None,
            anchor=AnchorReason.OPERATOR_PAUSE, restart=anchor, lost=Lost(None, message), finalize=finalize,
            events=lambda _: [Emit(ev.RUN_PAUSED, anchor, it, payload(anchor))]))

_PREVIEW_BYTES = 4096


def _preview(output: dict[str, Any]) -> Any:
    """A node's output as the timeline shows it: whole when small (the checkpoint keeps it whole)."""
    text = json.dumps(output, default=str)
    if len(text) <= _PREVIEW_BYTES:
        return output
    return {"truncated": True, "bytes": len(text), "preview": text[:_PREVIEW_BYTES]}


def _render_lenient(text: str | None, scope: dict[str, Any]) -> str:
    """A fail node's message: rendered when it can be, else its raw text (the verdict must land)."""
    if not text:
        return ""
    try:
        return render_text(text, scope, "fail", "message")
    except NodeFailure:
        return text
