"""Driving a run the store already holds: context, versioning, signals, the loop, cleanup.

Shared by launch and resume so both execute through exactly the same path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iterion.budget import Budget
from iterion.engine.cancel import CancelToken, signals_cancel
from iterion.engine.checkpoint_push import BANKED, after_stop, pusher_for
from iterion.engine.children import RunChildren
from iterion.engine.context import ExecContext, RunOptions
from iterion.engine.control import watch_control
from iterion.engine.dailycap import StoreDailyMeter, daily_cap
from iterion.engine.edges import nodes_in_cycles
from iterion.engine.errors import EngineError
from iterion.engine.notice import Listener, notifier, notify
from iterion.engine.result import RunResult
from iterion.engine.runner import Runner
from iterion.engine.sandboxing import build as build_sandbox
from iterion.engine.state import RunState
from iterion.engine.versioning import Versioning
from iterion.engine.worktree import finalize_worktree, never_created_result, release_finished_worktree
from iterion.ir import Workflow
from iterion.store import RunDoc, RunStatus, Store, WorkspaceMode
from iterion.store import events as ev
from iterion.store.errors import StoreUnavailableError
from iterion.store.spend_counter import spend_counter


def make_emit(store: Store, run_id: str, listener: Listener | None) -> Callable[..., None]:
    from iterion.builtins.vault import scrub
    from iterion.telemetry import with_telemetry

    listener = with_telemetry(run_id, listener)  # unchanged unless telemetry is on
    log = store.events(run_id)
    run_dir = store.run_dir(run_id)
    failed: list[str] = []  # one notice for the first lost event, not one per event

    def emit(type: str, node: str | None, iteration: int | None, payload: dict[str, Any]) -> None:
        try:
            # the PII vault's raw values never reach the log (iterion.builtins.vault)
            event = log.append(type, node=node, iteration=iteration, payload=scrub(run_dir, _jsonable(payload)))
        except (OSError, StoreUnavailableError) as exc:  # the timeline is for people; the checkpoint is the state
            if not failed:
                failed.append(type)
                notify(listener, f"could not append event {type} (later ones may be lost too): {exc}")
            return
        if listener is not None:
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - a display bug must never stop a run
                pass

    return emit


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def attachments_view(store: Store, run_id: str) -> dict[str, Any]:
    return {a.name: {"path": a.path, "mime": a.mime, "size": a.size, "sha256": a.sha256}
            for a in store.attachments(run_id).list()}


def load_artifact_values(store: Store, run_id: str, state: RunState) -> None:
    """``{{artifacts.NAME}}`` reads the newest live version (tombstoned ones, after a rewind, skipped)."""
    arts = store.artifacts(run_id)
    for name in state.artifact_versions:
        dead = set(state.tombstoned_artifacts.get(name, ()))
        doc = arts.latest(name, exclude=dead)
        if doc is not None:
            state.artifact_values[name] = doc.value
        else:
            state.artifact_values.pop(name, None)


def drive(store: Store, doc: RunDoc, wf: Workflow, state: RunState, budget: Budget, versioning: Versioning, *,
          options: RunOptions, token: CancelToken | None = None, listener: Listener | None = None,
          resumed: bool = False, answers: dict[str, Any] | None = None,
          emit: Callable[..., None] | None = None) -> RunResult:
    """Execute ``doc`` from ``state.next_node`` until it finishes, parks or fails."""
    token = token or CancelToken()
    token.ledger = RunChildren(store, doc.id)  # the run's live process groups, for a takeover
    load_artifact_values(store, doc.id, state)
    ctx = ExecContext(workflow=wf, store=store, run_id=doc.id, run_name=doc.name, state=state,
                      workspace=Path(doc.workspace_dir), versioning=versioning, budget=budget, token=token,
                      options=options, emit=emit or make_emit(store, doc.id, listener),
                      in_cycles=nodes_in_cycles(wf), attachments=attachments_view(store, doc.id),
                      notify=notifier(listener),
                      sandbox=build_sandbox(wf, Path(doc.workspace_dir), store.root, options.sandbox,
                                            options.permission_layers))

    finished: dict[str, Any] = {}

    def on_finish(c: ExecContext) -> dict[str, Any]:
        fresh = store.load_run(doc.id)
        if fresh.workspace_mode is not WorkspaceMode.WORKTREE or fresh.worktree is None:
            return {}
        opts = fresh.options
        if not fresh.worktree.created:  # no node needed the workspace: the branch, at the base, is the result
            finished.update(never_created_result(fresh.worktree.branch, fresh.worktree.base_commit,
                                                 Path(opts.get("repo_dir") or fresh.worktree.path)))
            return finished
        try:
            out = finalize_worktree(Path(fresh.worktree.path), fresh.worktree.branch,
                                    Path(opts.get("repo_dir") or fresh.worktree.path), fresh.name,
                                    merge_into=opts.get("merge_into"), auto_merge=bool(opts.get("auto_merge", True)))
        except EngineError as exc:
            c.emit(ev.WARNING, None, None, {"message": f"worktree finalisation failed: {exc.message}"})
            return {"final_branch": fresh.worktree.branch, "merge_skipped": exc.message}
        finished.update(out)
        return out

    ctx.checkpoints = pusher_for(store, doc, versioning, emit=ctx.emit)
    budget.attach_daily(StoreDailyMeter(spend_counter(store), daily_cap(options.daily_cap_usd), doc.id,
                                        warn=lambda m: ctx.emit(ev.WARNING, None, None, {"message": m})))
    with signals_cancel(token), watch_control(store, doc.id, token):
        result = Runner(ctx, on_finish=on_finish).run(resumed=resumed, answers=answers)
        # parked: bank a failed/cancelled run, record final_branch/final_commit, push its state
        after_stop(store, doc, result.status, versioning, emit=ctx.emit, pusher=ctx.checkpoints,
                   final=finished)
        if result.status is RunStatus.FINISHED:  # its commits are recorded: the checkout goes
            with contextlib.suppress(Exception):  # best effort; `iterion gc` removes it otherwise
                warning = release_finished_worktree(store, doc.id)
                if warning:
                    ctx.emit(ev.WARNING, None, None, {"message": warning})
        if result.status in (*BANKED, RunStatus.FINISHED):  # (a paused run's bank is an earlier one)
            with contextlib.suppress(Exception):  # display only; the run's outcome stands
                fresh = store.load_run(doc.id)
                result.final_branch = result.final_branch or fresh.final_branch
                result.final_commit = fresh.final_commit
        return result
