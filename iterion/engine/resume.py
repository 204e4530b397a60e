"""``resume_run``: continue a parked run under the same id from its checkpoint.

Order matters: the per-run lock, the status table, the source digest (refused unless --force,
showing both digests) and the answers are all checked BEFORE anything executes. A ``running``
run whose process died is taken over (``stale.admit_takeover``: at once when its owner is provably
dead here, else with --force-stale past the grace window), and a ``takeover:`` boundary is
recorded before the claim (``engine.takeover``). Then the state
is restored from the checkpoint (budget consumption included), a ``resume:`` boundary is
written and the checkpoint node re-executes (a human pause: the answers become its output).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.inputs import SOURCE_LIMIT, check_regular_file
from iterion.budget import Budget, BudgetAsk, merge_ask, raised_axes
from iterion.engine import launch as _launch  # noqa: F401 - registers the subbot child launcher
from iterion.engine.answers import check_pending_uploads, stage_pending_answers
from iterion.engine.cancel import CancelToken
from iterion.engine.checkpoint_push import OPTION_KEY as PUSH_OPTION
from iterion.engine.checkpoint_push import PushSetting, check_target
from iterion.engine.coerce import coerce_answers
from iterion.engine.context import RunOptions
from iterion.engine.dailycap import check_daily_cap, daily_cap
from iterion.engine.errors import AnswerError, EngineError, InvalidWorkflow, SourceChanged
from iterion.engine.execution import drive, make_emit
from iterion.engine.notice import Listener
from iterion.engine.placeholder import (
    PERMISSION_FIELD,
    PERMISSION_PLACEHOLDER,
    is_placeholder,
    placeholder,
    refusal,
)
from iterion.engine.preflight import check_checkpoint, check_event_log, check_run_dir
from iterion.engine.recovery import ACK_FIELD, check_env_settings
from iterion.engine.result import RunResult
from iterion.engine.resume_checks import (
    check_budget_raised,
    check_checkpoint_present,
    check_no_interrupted_rewind,
    check_workspace_usable,
    check_worktree_link,
)
from iterion.engine.sandboxing import OPTION_KEY as SANDBOX_OPTION
from iterion.engine.sandboxing import build as build_sandbox
from iterion.engine.sandboxing import recorded_flag
from iterion.engine.source import CompiledSource, compile_source
from iterion.engine.stale import admit_takeover, held_refusal
from iterion.engine.state import RunState, from_checkpoint
from iterion.engine.subbot_hooks import provide_resume
from iterion.engine.takeover import record_takeover
from iterion.engine.versioning import open_run_versioning
from iterion.engine.workspace_guard import hold_workspace, release_workspace
from iterion.invocation import command
from iterion.ir import NodeKind
from iterion.permissions import build_policy
from iterion.store import (
    Checkpoint,
    Command,
    OwnerInfo,
    RunDoc,
    RunStatus,
    Store,
    WorkspaceMode,
    check_command,
)
from iterion.store import events as ev
from iterion.store.errors import StatusRefusedError
from iterion.store.placement import check_store_placement
from iterion.store.spend_counter import spend_counter


@dataclass
class ResumeOptions:
    answers: dict[str, Any] = field(default_factory=dict)  # strings from --answer, typed from a file
    file: Path | None = None          # default: the recorded source path
    force: bool = False               # accept a changed workflow source
    budget: BudgetAsk | None = None   # --max-* overrides (0 = inherit)
    backend: str | None = None
    model: str | None = None          # --model: every LLM call's model from now on (kept by later resumes)
    script_file: str | None = None
    force_stale: bool = False
    watch: bool = True
    wait_workspace: bool = True       # in place: wait for a run executing there (--no-wait: refuse)
    on_wait: Callable[[str], None] | None = None  # told who holds the workspace while waiting
    permission: dict[str, Any] | None = None  # --permission* flags: a layer over the launch's (permissions.py)
    push_checkpoints: str | None = None  # replace the run's push remote ("" stops pushing; None keeps it)
    push_every: int | None = None        # replace its --push-every (0: only at stops)
    sandbox: str | None = None           # --sandbox auto|none: replaces the launch's (None keeps it)
    max_daily_cost_usd: float | None = None  # this resume's daily cap (None: $ITERION_DAILY_COST_CAP_USD)
    # a subbot's child: its parent's --permission* layers; those the child lacks go over its own
    # recorded ones, so a parent's later rule reaches a reattached child (docs/technical/subbots.md)
    parent_permission_layers: list[dict[str, Any]] = field(default_factory=list)


def resume_run(store: Store, run_id: str, options: ResumeOptions | None = None, *,
               token: CancelToken | None = None, listener: Listener | None = None) -> RunResult:
    options = options or ResumeOptions()
    run_id = store.resolve_run(run_id)
    if options.file is not None and not Path(options.file).is_dir():
        check_regular_file(options.file, "workflow file", SOURCE_LIMIT)  # before the lock records an owner
    if not store.is_locked(run_id):  # (a held lock is refused by try_acquire below, naming its owner)
        _preflight(store, run_id, options)  # check first: a refusal writes nothing, not even the lock record
    store.ensure_reserve(run_id)  # room to record its end on a full disk; a full disk refuses here
    lock = store.lock(run_id)
    if not lock.try_acquire():  # two processes never execute one run
        raise held_refusal(store, run_id)
    versioning = None
    ws_lock = None
    try:
        doc, cp = _preflight(store, run_id, options)  # again under the lock: authoritative
        admission = None
        if doc.status is RunStatus.RUNNING:
            # its process died: at once when provably dead here, else --force-stale past 60 s
            admission = admit_takeover(store, run_id, doc, lock, force_stale=options.force_stale)
        src = _recompile(doc, options)
        digest_changed = src.digest != doc.workflow_digest
        legacy = digest_changed and doc.workflow_digest == src.bare_digest
        if digest_changed and not legacy and not options.force:
            raise SourceChanged(run_id, doc.workflow_digest, src.digest, str(src.path))
        wf = src.workflow

        if cp is None:
            # no checkpoint: the runtime restarts from the workflow entry
            state = RunState(run_id=run_id, vars=dict(doc.vars), next_node=wf.entry)
            usage = None
        else:
            state = from_checkpoint(cp)
            usage = cp.accounting
        state.run_id = run_id
        recorded = list(doc.options.get("permission_layers") or [])
        inherited = [layer for layer in options.parent_permission_layers if layer not in recorded]
        layers = [*recorded, *inherited, *([options.permission] if options.permission else [])]
        build_policy(wf.extra.get("permission"), layers)  # refuse a malformed policy before anything changes
        # a fresh sandbox, never the last attempt's: refused here (the run keeps its status) when it cannot start
        sandbox_flag = options.sandbox or recorded_flag(doc.options)
        # a worktree not created yet (lazy creation): tried on the checkout it will be added to,
        # as at launch (the run's own sandbox is built on the worktree, once it exists)
        tried_in = Path(doc.options.get("repo_dir") or doc.workspace_dir) if (
            doc.worktree is not None and not doc.worktree.created) else Path(doc.workspace_dir)
        sandbox = build_sandbox(wf, tried_in, store.root, sandbox_flag, layers)
        answers = _check_answers(doc.status, state, wf, options.answers,
                                 new_permission=options.permission is not None or bool(inherited),
                                 ref=doc.name or state.run_id)
        check_pending_uploads(state, wf, answers)

        push_option = _push_override(doc, options)  # checked before anything is claimed
        ask = merge_ask(doc.budget, options.budget)
        check_budget_raised(doc, cp, ask)  # a budget stop resumed without a raised cap: refused up front
        budget = Budget(ask, usage=usage)
        emit = make_emit(store, run_id, listener)
        if legacy:
            emit(ev.SOURCE_CHANGE_ACCEPTED, None, None, {"reason": "launch recorded the bare digest of the main file",
                                                         "recorded": doc.workflow_digest, "current": src.digest})
        from_status = doc.status
        raised = sorted(raised_axes(doc.budget, ask))

        def claim(d: Any) -> None:
            d.set_status(RunStatus.RUNNING)
            d.budget = ask  # the merged ask persists, so a later retry keeps the raised cap
            d.owner = OwnerInfo.this_process()
            d.explicit_resume_required = False
            if digest_changed and not legacy:
                # re-stamp: the next rewind --auto diffs against what actually runs now
                d.workflow_digest = src.digest
                d.last_resume_digest = src.digest
                d.record_sources(src.main_path, src.sources)
            if options.backend:
                d.backend = options.backend
                d.options = {**d.options, "backend": options.backend}
            if options.model:
                d.options = {**d.options, "model": options.model}
            if options.script_file:
                d.options = {**d.options, "script_file": options.script_file}
            if options.permission or inherited:  # rebuilt on every later resume too (each resume adds its layer)
                d.options = {**d.options, "permission_layers": layers}
            d.options = {**d.options, SANDBOX_OPTION: sandbox.summary()}
            if push_option is not None:  # the override persists: later resumes keep it
                d.options = {k: v for k, v in d.options.items() if k != PUSH_OPTION}
                if push_option:
                    d.options[PUSH_OPTION] = push_option

        # open the workspace's versioning BEFORE claiming: a vanished worktree refuses here and
        # the run keeps its parked status
        check_worktree_link(doc)
        sandbox.preflight()
        if doc.workspace_mode is WorkspaceMode.IN_PLACE:
            check_store_placement(store.root, store.origin, Path(doc.workspace_dir))
            # one run executes in an in-place workspace at a time: wait (or refuse) before claiming
            ws_lock = hold_workspace(store, Path(doc.workspace_dir), run_id, wait=options.wait_workspace,
                                     on_wait=options.on_wait)
        versioning = open_run_versioning(store, doc, start=False, watch=options.watch)
        if admission is not None:  # what changed since its last boundary is unattributable
            record_takeover(store, doc, cp, how=admission.how, proof=admission.proof, versioning=versioning)
        answers = stage_pending_answers(store, run_id, state, wf, answers, emit)  # key=@./path uploads
        doc = store.update_run(run_id, claim)
        restart = state.next_node
        emit(ev.RUN_RESUMED, restart, state.iteration_of(restart) if restart else None,
             {"run_id": run_id, "name": doc.name, "workflow": doc.workflow_name,
              "restart_node": restart, "from_status": from_status.value, "forced": bool(digest_changed and options.force),
              "resumed_from": "human_pause" if state.pending is not None else from_status.value,
              "raised_caps": raised, "answers": bool(answers),
              "taken_over": admission.how if admission is not None else None,
              "sandbox": sandbox.summary(),
              **({"daily_cap_usd": options.max_daily_cost_usd} if options.max_daily_cost_usd is not None else {}),
              # the execution overrides this resume runs under (its own, or re-applied from the run)
              "backend": doc.options.get("backend") or doc.backend, "model": doc.options.get("model"),
              **({"resumed_from": "recovery_pause", "recovery_code": cp.recovery_code}
                 if cp is not None and cp.recovery_pause else {})})
        run_options = RunOptions(backend=doc.options.get("backend") or doc.backend,
                                 model=doc.options.get("model"),
                                 script_file=doc.options.get("script_file"),
                                 answers=dict(doc.options.get("answers") or {}), watch=options.watch,
                                 on_budget=str(doc.options.get("on_budget") or "fail"), permission_layers=layers,
                                 sandbox=sandbox_flag, daily_cap_usd=options.max_daily_cost_usd)
        return drive(store, doc, wf, state, budget, versioning, options=run_options, token=token,
                     listener=listener, resumed=True, answers=answers, emit=emit)
    finally:
        if versioning is not None:
            versioning.close()
        release_workspace(ws_lock)
        lock.release()


def _push_override(doc: RunDoc, options: ResumeOptions) -> dict[str, Any] | None:
    """The run's push setting after --push-checkpoints / --push-every on resume: None (unchanged),
    {} (pushing stops) or the new setting."""
    if options.push_checkpoints is None and options.push_every is None:
        return None
    current = PushSetting.from_options(doc.options)
    remote = options.push_checkpoints if options.push_checkpoints is not None else (
        current.remote if current else "")
    if not remote.strip():
        if options.push_every:
            raise EngineError(f"run {doc.id} pushes no checkpoints, so --push-every has nothing to pace",
                              hint="add --push-checkpoints REMOTE")
        return {}
    every = options.push_every if options.push_every is not None else (current.every if current else 0)
    if every < 0:
        raise EngineError(f"--push-every must be at least 1, got {every}")
    setting = PushSetting(remote.strip(), every, "resume")
    check_target(Path(doc.workspace_dir), setting)
    return setting.to_json()


def _preflight(store: Store, run_id: str, options: ResumeOptions) -> tuple[RunDoc, Checkpoint | None]:
    """What a resume needs, checked while only reading (iterion/engine/preflight.py)."""
    check_env_settings()  # a garbage $ITERION_RETRY_BACKOFF_S: refused, nothing written
    check_no_interrupted_rewind(store, run_id)
    doc = store.load_run(run_id)
    if doc.status is not RunStatus.RUNNING:  # a running run is admitted (or not) as a takeover
        check_command(Command.RESUME, run_id, doc.status, force_stale=options.force_stale)
    events = check_event_log(store, run_id)
    check_run_dir(store, run_id)
    cp = check_checkpoint(store, run_id)
    check_checkpoint_present(doc, cp, events, store.checkpoint_location(run_id))
    check_workspace_usable(doc)
    # parked by the store's daily cap: refused while today's spend still reaches the cap in effect
    check_daily_cap(doc, events, spend_counter(store), daily_cap(options.max_daily_cost_usd))
    return doc, cp


def _recompile(doc: Any, options: ResumeOptions) -> CompiledSource:
    path = options.file or (Path(doc.bundle_path) if doc.bundle_path else None) or (
        Path(doc.file_path) if doc.file_path else None)
    if path is None:
        raise EngineError(f"run {doc.id} recorded no workflow path", hint="pass --file WORKFLOW.bot")
    if options.file is None and not Path(path).exists():  # (a --file is checked by compile_source)
        raise EngineError(f"the workflow {path} recorded for run {doc.id} no longer exists",
                          hint="pass its new path with --file")
    try:
        return compile_source(path)
    except InvalidWorkflow as exc:  # not "no run was created": the run exists, and is left as it was
        raise InvalidWorkflow(exc.path, exc.diagnostics, f"run {doc.id} was not resumed") from None


def _check_answers(status: RunStatus, state: RunState, wf: Any, answers: dict[str, Any], *,
                   new_permission: bool = False, ref: str | None = None) -> dict[str, Any] | None:
    """Answers are required for a human pause, refused otherwise, and coerced up front. A
    permission pause may instead be resumed with new --permission* rules (the agent re-decides
    the pending call under the rebuilt policy, and asks again if it still says ask)."""
    pending = state.pending
    if status is RunStatus.PAUSED_WAITING_HUMAN and pending is not None:
        node = wf.nodes.get(pending.node)
        if not answers and new_permission and pending.questions.get("permission"):
            return None
        if not answers and pending.questions.get("permission"):
            raise StatusRefusedError(f"run {state.run_id} is waiting for a permission decision on node "
                                     f"{pending.node} ({pending.questions['permission'].get('tool')})",
                                     hint=command("resume", "--run-id", ref or state.run_id, "--answer",
                                                  f"{PERMISSION_FIELD}={PERMISSION_PLACEHOLDER}")
                                     + f" (or add a rule: --permission-allow '{pending.questions['permission'].get('tool')}(...)')")
        if not answers:
            fields = pending.questions.get("fields") or [{"name": "answer", "type": "string"}]
            names = ", ".join(str(f.get("name", "?")) for f in fields)
            words = [w for f in fields for w in ("--answer", f"{f.get('name')}={placeholder(f.get('type'), f.get('enum'))}")]
            raise StatusRefusedError(f"run {state.run_id} is waiting for answers to node {pending.node} ({names})",
                                     hint=command("resume", "--run-id", ref or state.run_id, *words))
        # a printed placeholder pasted unchanged answers nothing, whatever the pause (a gate's
        # schema refuses it too; an agent's question or a permission has no schema to)
        asked: list[dict[str, Any]] = (
            [{"name": PERMISSION_FIELD, "enum": ["yes", "no"]}] if pending.questions.get("permission")
            else pending.questions.get("fields") or [{"name": "answer", "type": "string"}])
        for f in asked:
            value = answers.get(str(f.get("name")))
            if is_placeholder(value, f.get("type"), f.get("enum")):
                raise EngineError(refusal(str(f.get("name")), str(value).strip()), exit_code=ErrorKind.BAD_INPUT)
        if pending.kind == "recovery" and ACK_FIELD not in answers:
            code = pending.questions.get("recovery_code")
            raise EngineError(f"run {state.run_id} is paused for recovery of node {pending.node} ({code}): "
                              f"answer {ACK_FIELD} once the cause is fixed",
                              hint=command("resume", "--run-id", ref or state.run_id, "--answer", f"{ACK_FIELD}=true"),
                              exit_code=ErrorKind.BAD_INPUT)
        if node is not None and node.kind is NodeKind.SUBBOT and pending.kind != "recovery":
            from iterion.engine.nodes.subbot import check_child_answers  # its child's gate fields

            check_child_answers(node.id, pending.questions, answers)
        if node is not None and node.kind is NodeKind.HUMAN and pending.kind != "recovery":
            try:
                coerce_answers(node.id, node.output_schema, answers)
            except AnswerError as exc:
                raise EngineError(str(exc), exit_code=ErrorKind.BAD_INPUT) from None
        return dict(answers)
    if answers:
        raise EngineError(f"run {state.run_id} is not waiting for answers (status {status.value})",
                          hint="drop the --answer flags")
    return None


def _resume_child(store: Store, run_id: str, *, token: CancelToken, **options: Any) -> RunResult:
    """A subbot's child run, continued by its parent (iterion/engine/nodes/subbot.py)."""
    return resume_run(store, run_id, ResumeOptions(**options), token=token)


provide_resume(_resume_child)
