"""subbot: run a child workflow as one node (docs/language.md "subbot (extension)").

The child is an ordinary run of the same store (own id, name, boundaries), launched or resumed
in this process, in the parent's workspace (the parent lends it its workspace lock). Its id is
written to the parent's ``RunDoc.subbot_children`` BEFORE the child exists, outside the
checkpoint, so a crash at any point leaves one child to reattach, never two:

* no child recorded (or the recorded one ended ``failed``): launch a new child;
* recorded but absent from the store (the crash came before its creation): launch it under that id;
* recorded and ``finished``: its outputs are the node's (the parent died after the child ended),
  unless it was launched for an earlier iteration of the node (a loop's next pass: a new child);
* recorded and parked, cancelled or ``running`` with a dead owner: resume it, with the
  parent's answers.

A cancel of the parent is relayed to the child (its own token, linked).

The decision reads only that map and the child's status, before the child workflow is compiled.
A parked child parks the parent ``paused_waiting_human`` with the child's questions (a child
paused by an operator or the daily cap parks it ``paused_operator``); a failed
child fails the node with the child's failure code. What the child spends is charged to the
parent's budget (the child is launched with at most what the parent has left).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gitrefs.persist.killpoint import kill_point
from iterion.budget import BudgetAsk, DailyCapReached, Usage
from iterion.engine.cancel import CancelToken
from iterion.engine.context import ExecContext, NodeCall, NodeResult, render_text
from iterion.engine.errors import ChildPaused, EngineError, NodeFailure
from iterion.engine.result import RunResult
from iterion.failure_codes import FailureCode
from iterion.store import RunDoc, RunStatus
from iterion.store.checkpoint import AnchorReason
from iterion.store.errors import StoreError

_RELAUNCH = (RunStatus.FAILED,)  # terminal: a new child (a cancelled one resumes, like any run)


def child_source(ctx: ExecContext, source_path: str) -> Path:
    """The child workflow, resolved against the parent's recorded main file."""
    from iterion.dsl.sources import MAIN
    from iterion.dsl.subbots import child_path

    doc = ctx.store.load_run(ctx.run_id)
    main = Path(doc.file_path or ctx.workspace / "workflow.bot")
    if main.is_dir():
        main = main / MAIN
    return child_path(main, source_path)


def _usage(ctx: ExecContext, child_id: str) -> Usage:
    try:
        cp = ctx.store.load_checkpoint(child_id)
    except Exception:  # noqa: BLE001 - no readable checkpoint: nothing was spent that we can see
        return Usage()
    return Usage() if cp is None else Usage(tokens=cp.accounting.tokens, cost_usd=cp.accounting.cost_usd,
                                            active_duration_s=cp.accounting.active_duration_s)


def _already_charged(ctx: ExecContext, node_id: str, child: RunDoc | None) -> Usage:
    """What of the child's spend the parent's accounting already holds. A stop of the parent while
    this node ran (the child parked, failed, hit a cap) charged all the child had spent; a
    checkpoint from before the node started (the parent died while its child ran, or after it
    finished) holds none of it. A finished child recorded without ``parent_iteration`` (older
    documents, which cannot tell a loop's earlier pass from this one) is taken as charged."""
    if child is None:
        return Usage()
    used = _usage(ctx, child.id)
    if child.status is RunStatus.FINISHED and child.parent_iteration is None:
        return used
    try:
        cp = ctx.store.load_checkpoint(ctx.run_id)
    except Exception:  # noqa: BLE001 - unreadable here: the pre-crash reading, as before
        return used
    if cp is not None and cp.restart_node == node_id and cp.anchor_reason in (AnchorReason.NODE_BOUNDARY,
                                                                               AnchorReason.ENTRY):
        return Usage()
    return used


def _child_ask(ctx: ExecContext, own: BudgetAsk, child_used: Usage | None = None) -> BudgetAsk:
    """The child's caps: its own, each lowered to what the parent has left on that axis. A
    reattached child's consumption (``child_used``) is already in the parent's, and the child's
    caps are compared with its own total: it may reach that plus what the parent has left."""
    parent, used = ctx.budget.ask, ctx.budget.usage()
    had = child_used or Usage()

    def low(mine: float, cap: float, spent: float, child_spent: float) -> float:
        if not cap:
            return mine
        left = max(cap - spent, 1e-9) + child_spent
        return min(mine, left) if mine else left

    return own.model_copy(update={
        "max_cost_usd": low(own.max_cost_usd, parent.max_cost_usd, used.cost_usd, had.cost_usd),
        "max_tokens": int(low(own.max_tokens, parent.max_tokens, used.tokens, had.tokens)) or own.max_tokens,
        "max_duration_s": low(own.max_duration_s, parent.max_duration_s, used.active_duration_s,
                              had.active_duration_s),
        "max_parallel_branches": int(min(own.max_parallel_branches or parent.max_parallel_branches,
                                         parent.max_parallel_branches or own.max_parallel_branches)),
    })


def _child_sandbox(ctx: ExecContext, node_id: str) -> str | None:
    """The child's ``--sandbox``: the parent's flag; without one, ``auto`` when the subbot node
    itself runs sandboxed (the parent's workflow asked for it), so the child is never less confined."""
    if ctx.options.sandbox:
        return ctx.options.sandbox
    if ctx.sandbox is not None and ctx.sandbox.of(node_id).active:
        return "auto"
    return None


def _still_capped(ctx: ExecContext, child_id: str) -> None:
    """A child parked by the daily cap, reattached while today's spend still reaches the cap in
    effect (the parent died before parking on it): the parent parks on it too, instead of failing
    the node on the child's refusal."""
    from iterion.engine.dailycap import daily_cap, reset_text
    from iterion.store.spend_counter import spend_counter

    if _daily_cap_pause(ctx, child_id) is None:
        return
    cap = daily_cap(ctx.options.daily_cap_usd)
    day = spend_counter(ctx.store).today()
    if cap is not None and day.spent_usd >= cap:
        raise DailyCapReached(cap, day.spent_usd, reset_text(day))


def _inherited(ctx: ExecContext, node_id: str, path: Path) -> dict[str, Any]:
    """What the child takes from the parent's launch (and its resumes) besides the permission
    layers and the caps: docs/technical/subbots.md lists every option and why."""
    from iterion.backends.script import find_script_file

    opts = ctx.options
    # the script backend's answers: the child's own file beside it, else the parent's
    return {"backend": opts.backend, "model": opts.model, "script_file": find_script_file(path) or opts.script_file,
            "watch": opts.watch, "sandbox": _child_sandbox(ctx, node_id), "max_daily_cost_usd": opts.daily_cap_usd}


def _daily_cap_pause(ctx: ExecContext, child_id: str) -> DailyCapReached | None:
    """The child parked ``paused_operator`` by the store's daily cap: the same stop for the parent."""
    from iterion.engine.dailycap import PAUSE_REASON, paused_by_cap
    from iterion.store import events as ev

    events = ctx.store.read_events(child_id)
    if not paused_by_cap(events):
        return None
    p = next(e.payload or {} for e in reversed(events) if e.type == ev.RUN_PAUSED)
    if p.get("pause_reason") != PAUSE_REASON:
        return None
    return DailyCapReached(float(p.get("cap_usd") or 0.0), float(p.get("spent_today_usd") or 0.0),
                           str(p.get("resets_at") or ""))


def _earlier_pass(child: RunDoc, iteration: int) -> bool:
    """A finished child launched for an earlier iteration of the node (a loop came back to it).
    A child recorded before ``parent_iteration`` existed is taken as this pass's (the old rule)."""
    return (child.status is RunStatus.FINISHED and child.parent_iteration is not None
            and child.parent_iteration != iteration)


def execute(ctx: ExecContext, call: NodeCall) -> NodeResult:
    from iterion.engine.workspace_guard import lend_workspace

    node = call.node
    recorded = ctx.store.load_run(ctx.run_id).subbot_children.get(node.id)
    child_doc = None
    if recorded is not None and ctx.store.exists(recorded):
        child_doc = ctx.store.load_run(recorded)
        if _earlier_pass(child_doc, call.iteration):
            recorded, child_doc = None, None  # its outputs belong to that pass; this one runs its own
    before = _already_charged(ctx, node.id, child_doc)
    with lend_workspace(ctx.workspace):
        if child_doc is not None and child_doc.status is RunStatus.FINISHED:
            result = RunResult(run_id=child_doc.id, name=child_doc.name, status=RunStatus.FINISHED)
        elif child_doc is not None and child_doc.status not in _RELAUNCH:
            result = _resume(ctx, call, child_doc.id)
        else:  # a recorded id with no run yet: the crash came before its creation, launch it
            result = _launch(ctx, call, recorded if recorded is not None and child_doc is None else None)
    child_id = result.run_id
    result_status, failure, error, pending = result.status, result.failure_code, result.error, result.pending
    kill_point("subbot-child-stopped")
    after = _usage(ctx, child_id)
    spent_tokens, spent_cost = max(after.tokens - before.tokens, 0), max(after.cost_usd - before.cost_usd, 0.0)
    if spent_tokens or spent_cost:
        from iterion.budget import BudgetExceeded

        try:
            ctx.budget.charge(tokens=spent_tokens, cost_usd=spent_cost, count_daily=False)
        except BudgetExceeded as exc:
            raise NodeFailure(FailureCode.BUDGET_EXCEEDED, f"subbot {node.id}: {exc.message}", node=node.id,
                              details={"axis": exc.axis, "cap": exc.cap, "consumed": exc.consumed,
                                       "child_run": child_id}) from None
    if result_status is RunStatus.FINISHED:
        return NodeResult(_outputs(ctx, call, child_id))
    ctx.token.check()  # the parent was cancelled (and relayed it): the parent's cancel, not a failure
    if result_status is RunStatus.PAUSED_OPERATOR:
        capped = _daily_cap_pause(ctx, child_id)
        if capped is not None:  # parks the parent paused_operator too; its resume continues the child
            raise capped
        raise ChildPaused(node.id, child_id)  # an operator paused the child: the same stop for the parent
    if result_status is RunStatus.PAUSED_WAITING_HUMAN and pending is not None:
        questions = {k: v for k, v in pending.items() if k not in ("interaction_id", "kind")}
        questions["subbot"] = {"child_run": child_id, "node": pending.get("node")}
        return NodeResult({}, pause=questions, pause_kind="human")
    # a child stopped without a code of its own (not expected): a typed code all the same
    code = failure or (FailureCode.CANCELLED if result_status is RunStatus.CANCELLED
                       else FailureCode.EXECUTION_FAILED).value
    raise NodeFailure(code, f"subbot {node.id}: child run {child_id} stopped {result_status.value}"
                      + (f": {error}" if error else ""), node=node.id,
                      details={"child_run": child_id, "child_status": result_status.value})


def check_child_answers(node_id: str, questions: dict[str, Any], answers: dict[str, Any]) -> None:
    """Answers given to a parent parked on its child's gate, checked against the gate's fields up
    front (a refusal leaves both runs parked, instead of failing the node on the child's resume)."""
    from gitrefs.persist.errors import ErrorKind
    from iterion.engine.coerce import coerce_answers
    from iterion.engine.errors import AnswerError
    from iterion.ir import FieldType, Schema, SchemaField

    fields = []
    for f in questions.get("fields") or []:
        try:
            ftype = FieldType(str(f.get("type")))
        except ValueError:
            continue
        fields.append(SchemaField(str(f.get("name")), ftype, tuple(f["enum"]) if f.get("enum") else None))
    if not fields:
        return
    try:
        coerce_answers(node_id, Schema("child_gate", tuple(fields)), answers)
    except AnswerError as exc:
        raise EngineError(str(exc), exit_code=ErrorKind.BAD_INPUT) from None


def _outputs(ctx: ExecContext, call: NodeCall, child_id: str) -> dict[str, Any]:
    """The child's final outputs: every node's fields, later nodes over earlier ones, and the
    whole map under ``outputs``; with an ``output:`` schema, only its fields (checked)."""
    from iterion.engine.coerce import validate_output

    cp = ctx.store.load_checkpoint(child_id)
    per_node: dict[str, Any] = dict(cp.outputs) if cp is not None else {}
    flat: dict[str, Any] = {}
    for out in per_node.values():
        if isinstance(out, dict):
            flat.update(out)
    schema = call.node.output_schema
    if schema is not None:
        return validate_output(call.node.id, schema, {f.name: flat[f.name] for f in schema.fields if f.name in flat})
    return {**flat, "outputs": per_node, "child_run": child_id}


@contextmanager
def _linked(ctx: ExecContext, child_id: str) -> Iterator[CancelToken]:
    """The child's cancel token, cancelled when the parent's is (the child's drive attaches its
    own process ledger to it, so it cannot share the parent's token); and an ``iterion pause`` of
    the parent passed on to the child, so it takes effect at the child's next node boundary
    instead of after the whole child (the child parks, then the parent: ``ChildPaused``)."""
    from iterion.engine.control import Action, read_request, write_request

    parent = ctx.token
    child = CancelToken()
    done = threading.Event()

    def relay() -> None:
        paused = False
        while not done.is_set():
            if parent.wait(0.2):
                child.cancel(parent.reason or "cancelled")
                return
            req = None if paused else read_request(ctx.store, ctx.run_id)
            if req is not None and req.action is Action.PAUSE:
                paused = True
                write_request(ctx.store, child_id, Action.PAUSE, f"{req.reason} (parent run {ctx.run_id})")

    thread = threading.Thread(target=relay, name="subbot-cancel-relay", daemon=True)
    thread.start()
    try:
        yield child
    finally:
        done.set()
        thread.join(1)


def _launch(ctx: ExecContext, call: NodeCall, child_id: str | None) -> RunResult:
    from iterion.budget import BudgetAsk as Ask
    from iterion.engine.source import compile_source
    from iterion.engine.subbot_hooks import launch_child
    from iterion.store.ids import new_id

    node = call.node
    assert node.source_path is not None
    path = child_source(ctx, node.source_path)
    values = {key: render_text(tpl, call.scope, node.id, f"with.{key}") for key, tpl in node.subbot_with}
    try:
        src = compile_source(path)
    except EngineError as exc:
        raise NodeFailure(FailureCode.IR_UNLOADABLE, f"subbot {node.id}: child workflow {path}: {exc.message}",
                          node=node.id) from None
    src.workflow.worktree = False  # the child works in the parent's workspace (its worktree, for a worktree run)
    child_id = child_id or new_id()

    def record(d: Any) -> None:  # before the child exists: a crash cannot launch two
        d.subbot_children = {**d.subbot_children, node.id: child_id}

    ctx.store.update_run(ctx.run_id, record)
    try:
        with _linked(ctx, child_id) as token:
            return launch_child(ctx.store, path, src, token=token, vars=values, workspace=ctx.workspace,
                                budget=_child_ask(ctx, Ask.from_ir(src.workflow.budget)), run_id=child_id,
                                on_budget=ctx.options.on_budget, parent_run=ctx.run_id, parent_node=node.id,
                                parent_iteration=call.iteration,
                                permission_layers=list(ctx.options.permission_layers),
                                **_inherited(ctx, node.id, path))
    except (EngineError, StoreError) as exc:
        raise NodeFailure(FailureCode.EXECUTION_FAILED, f"subbot {node.id}: the child could not start: {exc}",
                          node=node.id, details={"child_run": child_id}) from None


def _resume(ctx: ExecContext, call: NodeCall, child_id: str) -> RunResult:
    from iterion.engine.subbot_hooks import resume_child

    answers = call.answers or {}
    child = ctx.store.load_run(child_id)
    cp = ctx.store.load_checkpoint(child_id) if child.status is RunStatus.PAUSED_WAITING_HUMAN else None
    p = cp.pending_interaction if cp is not None else None
    recorded_layers = child.options.get("permission_layers") or []
    # a permission question the parent's resume brought new rules for: the child re-decides under them
    new_rules = p is not None and bool(p.questions.get("permission")) and any(
        layer not in recorded_layers for layer in ctx.options.permission_layers)
    if child.status is RunStatus.PAUSED_WAITING_HUMAN and not answers and not new_rules:
        # reattached without answers (the parent was taken over): ask the child's question again
        pending = None if p is None else {"interaction_id": p.id, "node": p.node, "kind": p.kind, **p.questions}
        return RunResult(run_id=child_id, name=child.name, status=child.status, pending=pending)
    from iterion.budget import BudgetAsk as Ask
    from iterion.engine.source import compile_source

    if child.status is RunStatus.PAUSED_OPERATOR:
        _still_capped(ctx, child_id)
    recorded = child.bundle_path or child.file_path
    path = Path(recorded) if recorded else child_source(ctx, call.node.source_path or "")
    try:
        own = Ask.from_ir(compile_source(path).workflow.budget)
    except EngineError:
        own = Ask()  # the child's resume reports its unloadable source itself
    try:
        with _linked(ctx, child_id) as token:
            return resume_child(ctx.store, child_id, token=token, answers=dict(answers),
                                budget=_child_ask(ctx, own, _usage(ctx, child_id)),
                                parent_permission_layers=list(ctx.options.permission_layers),
                                **_inherited(ctx, call.node.id, path))
    except (EngineError, StoreError) as exc:
        raise NodeFailure(FailureCode.EXECUTION_FAILED, f"subbot {call.node.id}: child run {child_id} could not "
                          f"be resumed: {exc}", node=call.node.id, details={"child_run": child_id}) from None
