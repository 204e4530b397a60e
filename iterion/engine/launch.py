"""Launching a run: compile, resolve vars, create the run document, then execute it.

A workflow with validation errors is refused BEFORE anything is created (InvalidWorkflow).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.text import require_utf8_path
from iterion.backends.choice import resolve_backend
from iterion.backends.pricing import unpriced_warnings
from iterion.backends.registry import canonical_or_none
from iterion.backends.script import find_script_file
from iterion.budget import Budget, BudgetAsk, merge_ask
from iterion.engine.cancel import CancelToken
from iterion.engine.checkpoint_push import OPTION_KEY as PUSH_OPTION
from iterion.engine.checkpoint_push import check_target, resolve_setting
from iterion.engine.coerce import coerce_value
from iterion.engine.context import RunOptions
from iterion.engine.declared import FEATURE_NOT_ENFORCED, not_enforced
from iterion.engine.errors import AnswerError, EngineError
from iterion.engine.execution import drive, make_emit
from iterion.engine.nodes.llmcall import node_model
from iterion.engine.notice import Listener
from iterion.engine.recovery import check_env_settings
from iterion.engine.result import RunResult
from iterion.engine.sandboxing import OPTION_KEY as SANDBOX_OPTION
from iterion.engine.sandboxing import build as build_sandbox
from iterion.engine.source import CompiledSource, compile_source
from iterion.engine.state import RunState, to_checkpoint
from iterion.engine.storage import storage_oserror
from iterion.engine.subbot_hooks import provide_launch
from iterion.engine.versioning import open_run_versioning
from iterion.engine.workspace_guard import hold_workspace, release_workspace
from iterion.engine.worktree import plan_worktree
from iterion.envsubst import expand_launch
from iterion.ir import FieldType, Node, NodeKind, RouterMode, SchemaField, Workflow
from iterion.permissions import build_policy
from iterion.store import AnchorReason, OwnerInfo, RunDoc, RunStatus, Store, WorkspaceMode, WorktreeInfo
from iterion.store import events as ev
from iterion.store.errors import StoreFullError
from iterion.store.ids import friendly_name, new_id
from iterion.store.placement import prepare_store


@dataclass
class LaunchOptions:
    vars: dict[str, str] = field(default_factory=dict)     # --var k=v (strings, coerced to the var's type)
    preset: str | None = None
    backend: str | None = None
    model: str | None = None                                # --model: every LLM call's model
    script_file: str | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # human answers known up front
    workspace: Path | None = None                           # in-place workspace (default: cwd)
    budget: BudgetAsk | None = None                         # --max-* overrides
    branch_name: str | None = None                          # worktree runs
    merge_into: str | None = None
    auto_merge: bool = True
    watch: bool = True
    run_id: str | None = None
    attachments: dict[str, Path] = field(default_factory=dict)  # --attach name=path (launch inputs)
    on_budget: str = "fail"                                 # --on-budget: BUDGET_EXCEEDED fails or pauses
    wait_workspace: bool = True                             # in place: wait for a run executing there (--no-wait: refuse)
    on_wait: Callable[[str], None] | None = None            # told who holds the workspace while waiting
    permission: dict[str, Any] | None = None                # --permission* flags (permissions.layer_to_json)
    push_checkpoints: str | None = None                     # --push-checkpoints REMOTE ("" off; None: env, workflow)
    push_every: int | None = None                           # --push-every N
    adopt_queued: bool = False                              # run_id names a `queued` run (a queue runner's claim)
    sandbox: str | None = None                              # --sandbox auto|none (None: the workflow's sandbox:)
    parent_run: str | None = None                           # a subbot's child: the parent run and node
    parent_node: str | None = None
    parent_iteration: int | None = None
    # a subbot's child: its parent's --permission* layers (launch and resumes, in order, under
    # this launch's own) and its --max-daily-cost-usd (docs/technical/subbots.md)
    permission_layers: list[dict[str, Any]] = field(default_factory=list)
    max_daily_cost_usd: float | None = None


def resolve_vars(wf: Workflow, preset: str | None, raw: dict[str, Any],
                 warnings: list[str] | None = None, *, project_dir: Path | None = None) -> dict[str, Any]:
    """Defaults < preset < ``--var`` values, each coerced to its var's type (docs/language.md 2). A value
    that does not coerce is kept as written and described in ``warnings`` ("a failed coercion
    keeps the raw value with a warning"); a json var that is not JSON is that text."""
    # string defaults and --var values are env-expanded at run start ($N, ${N}), with
    # "PROJECT_DIR = the run's workspace (in a sandbox, its container path)" (docs/language.md §1; the
    # bubblewrap sandbox mounts the workspace at its own path)
    env: Mapping[str, str] = os.environ if project_dir is None else {**os.environ, "PROJECT_DIR": str(project_dir)}
    values: dict[str, Any] = {n: expand_launch(v.default, env) if isinstance(v.default, str) else v.default
                              for n, v in wf.vars.items() if v.has_default}
    if preset is not None:
        if preset not in wf.presets:
            known = ", ".join(sorted(wf.presets)) or "none declared"
            raise EngineError(f"unknown preset {preset!r} (presets: {known})")
        values.update(wf.presets[preset])
    for key, text in raw.items():
        var = wf.vars.get(key)
        if var is None:
            known = ", ".join(sorted(wf.vars)) or "none declared"
            raise EngineError(f"unknown var {key!r} (vars: {known})", hint="declare it under vars: in the workflow")
        value = expand_launch(text, env) if isinstance(text, str) else text
        try:
            values[key] = coerce_value(SchemaField(key, var.type), value)
        except AnswerError as exc:
            unsafe = (exc.reason or "").lower()
            if any(w in unsafe for w in ("finite", "deep", "nan", "infinity", "large", "out of range")):
                # bounded inputs: a non-finite number or a too-deep document is refused, never kept
                raise EngineError(f"--var {key}: {exc.reason}") from None
            values[key] = value
            if var.type is not FieldType.JSON and warnings is not None:
                shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
                why = exc.reason or f"is not a valid {var.type.value}"
                warnings.append(f"--var {key}={shown!r} {why}; kept as text")
    missing = sorted(n for n in wf.vars if n not in values)
    if missing:
        raise EngineError(f"var {', '.join(missing)} has no default and was not given",
                          hint=" ".join(f"--var {m}=VALUE" for m in missing))
    return values


def check_attachments(wf: Workflow, given: dict[str, Path]) -> None:
    """Every given attachment is declared and readable; every required one is given."""
    for name, path in given.items():
        if name not in wf.attachments:
            known = ", ".join(sorted(wf.attachments)) or "none declared"
            raise EngineError(f"unknown attachment {name!r} (attachments: {known})")
        if not Path(path).is_file():
            raise EngineError(f"attachment {name}: {path} is not a readable file")
    missing = sorted(n for n, a in wf.attachments.items() if a.required and n not in given)
    if missing:
        raise EngineError(f"attachment {', '.join(missing)} is required and was not given",
                          hint=" ".join(f"--attach {m}=PATH" for m in missing))


def _queued_doc(store: Store, run_id: str) -> RunDoc:
    """The ``queued`` document a queue delivery launches (created by the server that queued it)."""
    doc = store.load_run(run_id)
    if doc.status is not RunStatus.QUEUED:
        raise EngineError(f"run {run_id} is {doc.status.value}, not queued: a launch delivery cannot start it",
                          hint=f"resume it instead: iterion resume --run-id {run_id}", exit_code=ErrorKind.REFUSED)
    return doc


def launch_run(store: Store, path: Path | str, options: LaunchOptions | None = None, *,
               token: CancelToken | None = None, listener: Listener | None = None,
               compiled: CompiledSource | None = None) -> RunResult:
    options = options or LaunchOptions()
    src = compiled or compile_source(path)  # raises InvalidWorkflow before anything exists
    wf = src.workflow
    var_warnings: list[str] = []
    workspace = Path(options.workspace or Path.cwd()).resolve()
    values = resolve_vars(wf, options.preset, options.vars, var_warnings, project_dir=workspace)
    check_attachments(wf, options.attachments)
    ask = merge_ask(BudgetAsk.from_ir(wf.budget), options.budget)
    layers = [*options.permission_layers, *([options.permission] if options.permission else [])]
    build_policy(wf.extra.get("permission"), layers)  # a malformed permission: block refuses before anything exists
    if not workspace.exists():  # never created: a typo must not become a fresh empty workspace
        raise EngineError(f"workspace {workspace} does not exist",
                          hint=f"create it first (mkdir -p {workspace}) or pass an existing directory")
    if not workspace.is_dir():
        raise EngineError(f"workspace {workspace} is not a directory")
    # an unsupported sandbox: block, or a sandbox that cannot start here: refused before the run exists
    sandbox = build_sandbox(wf, workspace, store.root, options.sandbox, layers)
    sandbox.preflight()
    require_utf8_path(str(workspace), "workspace")  # refused before the run (or its directory) exists
    require_utf8_path(str(src.path.resolve()), "workflow file")
    script_file = options.script_file or find_script_file(src.path)
    if script_file:
        require_utf8_path(script_file, "script file")
    check_env_settings()  # a garbage $ITERION_RETRY_BACKOFF_S: refused before the run exists
    run_id = options.run_id or new_id()
    queued = _queued_doc(store, run_id) if options.adopt_queued else None
    name = queued.name if queued is not None else friendly_name(wf.name, store.run_names())
    prepare_store(store.root, store.origin, workspace)  # refused inside the working tree unless ignored
    push = resolve_setting(options.push_checkpoints, options.push_every, wf.push_checkpoints, wf.push_every)
    if push is not None:
        check_target(workspace, push)  # no repository / unknown remote: refused before the run exists

    worktree_info = None
    mode = WorkspaceMode.IN_PLACE
    run_workspace = workspace
    if wf.worktree:
        # checked and its base fixed now; the checkout is made before the first node that needs it
        created = plan_worktree(workspace, store.root, run_id, options.branch_name or f"iterion/run/{name}")
        worktree_info = WorktreeInfo(path=str(created.path), branch=created.branch, base_commit=created.base_commit,
                                     created=False)
        mode, run_workspace = WorkspaceMode.WORKTREE, created.path
        # the run's workspace is its worktree: ${PROJECT_DIR} names it (docs/language.md §1)
        values = resolve_vars(wf, options.preset, options.vars, project_dir=run_workspace)
        repo_dir = str(created.repo)
    else:
        repo_dir = None

    doc = RunDoc(id=run_id, name=name, status=RunStatus.RUNNING, workflow_name=wf.name,
                 file_path=str(src.path.resolve()), bundle_path=src.bundle_path, preset=options.preset,
                 workflow_digest=src.digest, vars=values, inputs=dict(options.vars), budget=ask,
                 backend=options.backend,
                 options={"script_file": script_file, "backend": options.backend, "repo_dir": repo_dir,
                          **({"model": options.model} if options.model else {}),
                          "merge_into": options.merge_into, "auto_merge": options.auto_merge,
                          "answers": options.answers, "on_budget": options.on_budget,
                          "permission_layers": layers, SANDBOX_OPTION: sandbox.summary(),
                          **({PUSH_OPTION: push.to_json()} if push is not None else {})},
                 workspace_dir=str(run_workspace), workspace_mode=mode, worktree=worktree_info,
                 owner=OwnerInfo.this_process(), parent_run=options.parent_run, parent_node=options.parent_node,
                 parent_iteration=options.parent_iteration)
    doc.record_sources(src.main_path, src.sources)
    # in place: wait for (or, --no-wait, refuse) another run executing here BEFORE the run exists
    ws_lock = None if wf.worktree else hold_workspace(store, workspace, run_id, wait=options.wait_workspace,
                                                      on_wait=options.on_wait)
    try:
        if queued is not None:
            # the queued document becomes the run: a compare-and-swap, so two claimers never both win
            doc.created_at = queued.created_at
            doc.options = {**queued.options, **doc.options}  # where it was queued from stays recorded
            store.save_run(doc, queued.version)
        else:
            store.create_run(doc)  # a full disk here leaves no run directory behind (StoreFullError)
    except BaseException:
        release_workspace(ws_lock)
        raise
    lock = store.lock(run_id)
    versioning = None
    started = False  # until the entry checkpoint exists, a full disk discards the whole run
    try:
        lock.acquire()
        for att_name, att_path in options.attachments.items():
            store.attachments(run_id).stage(att_name, Path(att_path))
        try:
            versioning = open_run_versioning(store, doc, start=True, watch=options.watch)
        except Exception as exc:
            if storage_oserror(exc) is not None:
                raise
            # the run exists but cannot execute: leave it terminal, not "running" with no owner
            message = f"the workspace cannot be versioned: {getattr(exc, 'message', None) or exc}"
            store.update_run(run_id, lambda d: d.set_status(RunStatus.FAILED, failure_code="WORKSPACE_SAFETY",
                                                            error=message))
            raise EngineError(message, hint=getattr(exc, "hint", None), exit_code=ErrorKind.REFUSED) from exc
        state = RunState(run_id=run_id, vars=values, next_node=wf.entry)
        budget = Budget(ask)
        emit = make_emit(store, run_id, listener)
        emit(ev.RUN_STARTED, None, None, {"run_id": run_id, "workflow": wf.name, "name": name,
                                          "file": doc.file_path,
                                          "digest": src.digest, "workspace": str(run_workspace),
                                          "mode": mode.value, "mechanism": versioning.mechanism,
                                          "sandbox": sandbox.summary(),
                                          **({"model": options.model} if options.model else {})})
        for text in var_warnings:
            emit(ev.WARNING, None, None, {"message": text})
        def runs_on(node: Node) -> str:  # the resolution order, as the nodes will apply it (llmcall)
            name = resolve_backend(os.environ, override=options.backend, node_backend=node.backend,
                                   workflow_backend=wf.default_backend, script_file=script_file).name
            return canonical_or_none(name) or name

        for gap in not_enforced(wf, runs_on):  # said once, at the start: declared blocks this engine does not execute
            emit(ev.WARNING, gap["node"], None, {"code": FEATURE_NOT_ENFORCED, **gap})
        # a cost cap that cannot see a node's spending (no price for its model): said at the start
        llm_nodes = [n for n in wf.nodes.values() if n.kind in (NodeKind.AGENT, NodeKind.JUDGE)
                     or (n.kind is NodeKind.ROUTER and n.mode is RouterMode.LLM)]
        for gap in unpriced_warnings(llm_nodes, runs_on, ask.max_cost_usd,
                                     lambda n: node_model(n, options.model, runs_on(n))):
            emit(ev.WARNING, gap["node"], None, gap)
        # nothing executed yet: a failure before the first boundary still has a restart point
        store.save_checkpoint(run_id, to_checkpoint(state, usage=budget.usage(), anchor=AnchorReason.ENTRY,
                                                    restart_node=wf.entry, restart_iteration=0))
        started = True
        emit(ev.CHECKPOINT_WRITTEN, wf.entry, 0, {"restart_node": wf.entry, "anchor": AnchorReason.ENTRY.value})
        run_options = RunOptions(backend=options.backend, model=options.model, script_file=script_file,
                                 answers=options.answers,
                                 watch=options.watch, on_budget=options.on_budget, permission_layers=layers,
                                 sandbox=options.sandbox, daily_cap_usd=options.max_daily_cost_usd)
        return drive(store, doc, wf, state, budget, versioning, options=run_options, token=token,
                     listener=listener, emit=emit)
    except OSError as exc:
        err = storage_oserror(exc)
        if started or err is None:
            raise
        if versioning is not None:
            versioning.close()
            versioning = None
        lock.release()
        if queued is None:
            store.discard_new_run(run_id)  # nothing executed: no half-made run is left
        raise StoreFullError.from_os_error(err, store.root, "no run was created") from None
    finally:
        if versioning is not None:
            versioning.close()
        lock.release()
        release_workspace(ws_lock)


def _launch_child(store: Store, path: Path, compiled: CompiledSource, *, token: CancelToken,
                  **options: Any) -> RunResult:
    """A subbot's child run (iterion/engine/nodes/subbot.py)."""
    return launch_run(store, path, LaunchOptions(**options), compiled=compiled, token=token)


provide_launch(_launch_child)
