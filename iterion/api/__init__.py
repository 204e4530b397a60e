"""iterion's Python API: launch, resume, rewind and read runs from Python.

The same engine functions the CLI calls (``launch_run``, ``resume_run``, ``rewind_run``, the
store's documents), with typed results (``iterion.api.types``) and typed exceptions
(``iterion.api.errors``) instead of printed lines and exit codes. docs/python-api.md shows it.

    import iterion
    r = iterion.run("demo.bot", vars={"topic": "rivers"})
    if r.question:                                   # parked on a human gate: not an exception
        r = iterion.resume(r.id, answers={"approved": True, "note": "ship it"})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iterion.api.errors import (
    AutoRewindRefusedError,
    EnvironmentProblemError,
    InvalidWorkflowError,
    IterionError,
    RefusedError,
    RewindRefusedError,
    RunBusyError,
    RunFailedError,
    RunNotFoundError,
    SourceChangedError,
    StoreProblemError,
    translate,
)
from iterion.api.types import ControlReport, Field, Question, RewindReport, Run, RunSummary, UndoReport
from iterion.requests import LaunchRequest, ResumeRequest
from iterion.store.status import RunStatus

if TYPE_CHECKING:
    from iterion.engine.cancel import CancelToken
    from iterion.engine.result import RunResult
    from iterion.engine.resume import ResumeOptions
    from iterion.rewind.auto_detect import DetectedEdit
    from iterion.store import Event, Store

__all__ = [
    "AutoRewindRefusedError", "ControlReport", "EnvironmentProblemError", "Field", "InvalidWorkflowError", "IterionError", "LaunchRequest", "Question",
    "RefusedError", "ResumeRequest",
    "RewindRefusedError", "Run", "RunBusyError", "RunFailedError", "RunNotFoundError", "RunStatus",
    "RunSummary", "SourceChangedError", "StoreProblemError", "UndoReport", "cancel", "inspect", "pause", "resume",
    "rewind", "run", "runs", "undo_rewind", "withdraw_request",
]

OnEvent = Callable[["Event"], None]
# given a human pause's questions (``Run.pending``), the answers to resume with, or None (stay parked)
OnQuestion = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]


@contextmanager
def _errors() -> Iterator[None]:
    """Every layer's refusal re-raised as the API's exception (a bug propagates unchanged)."""
    try:
        yield
    except IterionError:
        raise
    except Exception as exc:
        mapped = translate(exc)
        if mapped is None:
            raise
        raise mapped from exc


def _open(store: Store | str | Path | None, *, write: bool, skip: str | None = None) -> Store:
    """The store: given, or found as the CLI finds it ($ITERION_NATS_URL, $ITERION_STORE_DIR, the
    git repository or project of the current directory); stale `running` runs promoted first, as
    every command does (``iterion.command_store``: the one home of both; a sweep problem never
    blocks the call, the call itself reports)."""
    from iterion.command_store import open_command_store, sweep_orphans

    st = open_command_store(store, write=write)
    sweep_orphans(st, skip)
    return st


def _var_text(value: Any) -> str:
    """A var value as `--var` passes it (the engine coerces the text to the var's type)."""
    import json

    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value)


def _load(st: Store, run_id: str, result: RunResult | None = None, *, detail: bool = False) -> Run:
    doc = st.load_run(run_id)
    try:
        cp = st.load_checkpoint(run_id)
    except Exception:
        if result is None:
            raise
        cp = None  # the call's result already says what happened (e.g. a storage failure)
    pending = cp.pending_interaction if cp is not None else None
    question = Question.of(pending.node, pending.kind, pending.questions) if pending is not None else None
    raw_pending = result.pending if result is not None else (
        {"interaction_id": pending.id, "node": pending.node, "kind": pending.kind,
         **pending.questions} if pending is not None else None)
    usage = cp.accounting if cp is not None else None
    return Run(
        id=doc.id, name=doc.name, status=doc.status, workflow=doc.workflow_name,
        failure_code=doc.failure_code, error=doc.error,
        checkpoint_node=cp.restart_node if cp is not None else None,
        question=question if doc.status is RunStatus.PAUSED_WAITING_HUMAN else None,
        outputs=dict(cp.outputs) if cp is not None else {},
        executed=tuple(f"{e.node}:{e.iteration}" for e in cp.executed) if cp is not None else (),
        workspace=doc.workspace_dir or "", tokens=int(usage.tokens) if usage else 0,
        cost_usd=float(usage.cost_usd) if usage else 0.0,
        # run/resume: the branch the engine reported for this call (the summary of `iterion run` prints it)
        final_branch=result.final_branch if result is not None else doc.final_branch, final_commit=doc.final_commit,
        merged_into=result.merged_into if result is not None else None, stored_in=st.run_dir(run_id),
        pending=raw_pending if doc.status is RunStatus.PAUSED_WAITING_HUMAN else None, result=result,
        file=doc.file_path, mode=doc.workspace_mode.value, created_at=doc.created_at,
        ended_at=doc.finished_at if doc.status.is_terminal else None,
        **_detail(st, doc, cp, detail),
    )


def _detail(st: Store, doc: Any, cp: Any, wanted: bool) -> dict[str, Any]:
    if not wanted:
        return {}
    from iterion.api.detail import run_detail

    detail, interrupted = run_detail(st, doc, cp)
    return {"detail": detail, "interrupted_rewind": interrupted}


def _answer_while_asked(st: Store, result: RunResult, on_question: OnQuestion | None, retry: ResumeOptions, *,
                        token: CancelToken, listener: OnEvent | None) -> RunResult:
    """While ``result`` is parked at a human gate and ``on_question`` answers, resume with its answers."""
    from dataclasses import replace

    from iterion.engine.resume import resume_run

    while on_question is not None and result.status is RunStatus.PAUSED_WAITING_HUMAN and result.pending:
        answers = on_question(result.pending)
        if answers is None:
            break
        result = resume_run(st, result.run_id, replace(retry, answers=dict(answers)), token=token, listener=listener)
    return result


def run(workflow: str | Path | None = None, *, workspace: str | Path | None = None,
        vars: Mapping[str, Any] | None = None, answers: Mapping[str, Any] | None = None,
        backend: str | None = None, store: Store | str | Path | None = None, preset: str | None = None,
        script: str | Path | None = None, attachments: Mapping[str, str | Path] | None = None,
        auto_resume: int = 0, wait: bool = True, on_event: OnEvent | None = None,
        request: LaunchRequest | None = None, on_question: OnQuestion | None = None,
        token: CancelToken | None = None, compiled: Any = None, answers_source: str = "answers",
        engine_options: Mapping[str, Any] | None = None, run_id: str | None = None) -> Run:
    """Run ``workflow`` (a .bot file, a bundle directory or a .botz) from its entry node, as
    ``iterion run`` does, and return the run once it finished, failed or parked.

    ``workspace``: where it executes in place (default: the current directory). ``vars``: the
    workflow's vars (values are coerced to their declared types). ``answers``: human answers known
    up front, node-keyed ``{"approve": {"approved": True}}`` (or flat ``{"approved": True}`` when
    the workflow has one human node). ``backend``: one backend for every LLM node (``"script"``,
    ``"openai"``, ``"claw"``...); ``script``: the script backend's answers file. ``store``: a
    ``Store``, or the store directory (default: found as the CLI finds it). ``auto_resume``: resume
    a transient failure up to N times. ``wait=False``: refuse instead of waiting while another run
    executes in the same workspace. ``on_event``: called with every event the run appends
    (``iterion.store.Event``). ``request``: a ``LaunchRequest`` (``iterion.requests``: the model
    ``iterion run`` and ``POST /api/runs`` build) instead of the request's keyword arguments.
    ``on_question``: called with the questions (``Run.pending``) whenever the run parks on a human
    gate; the answers it returns resume the run at once, None leaves it parked. ``token``: an
    ``iterion.engine.cancel.CancelToken`` to cancel the run from another thread. ``compiled``: the
    workflow already compiled (``iterion.engine.source.compile_source``). ``answers_source``: how
    a refusal of the answers names them. ``engine_options``: fields of the engine's options that
    only this process decides (``on_wait``, ``permission``, ``sandbox``, ``push_checkpoints``,
    ``push_every``), as ``iterion run`` passes its flags. ``run_id``: the new run's id
    (``iterion.store.ids.new_id()``), known before the call returns: another thread can then
    ``pause`` or ``cancel`` it.
    """
    from iterion.engine.auto_resume import auto_resume as retry_automatically
    from iterion.engine.cancel import CancelToken
    from iterion.engine.launch import launch_run
    from iterion.engine.resume import ResumeOptions, resume_run
    from iterion.engine.source import compile_source
    from iterion.requests import LaunchRequest, human_nodes

    with _errors():
        if request is None:
            if workflow is None:
                raise RefusedError("give the workflow to run", hint='e.g. iterion.run("demo.bot")')
            request = LaunchRequest.build(
                file=str(workflow), workspace=str(workspace) if workspace is not None else None,
                vars={k: _var_text(v) for k, v in (vars or {}).items()}, preset=preset, backend=backend,
                script=str(Path(script).resolve()) if script is not None else None, answers=dict(answers or {}),
                attachments={k: str(v) for k, v in (attachments or {}).items()} or None)
        st = _open(store, write=True)
        if compiled is None:
            compiled = compile_source(Path(request.file))
        local = dict(engine_options or {})
        if run_id is not None:
            local["run_id"] = run_id
        options = request.launch_options(human_nodes(compiled), source=answers_source, wait_workspace=wait, **local)
        token = token or CancelToken()
        result = launch_run(st, Path(request.file), options, token=token, listener=on_event, compiled=compiled)
        retry = ResumeOptions(backend=request.backend, script_file=request.script, wait_workspace=wait,
                              on_wait=local.get("on_wait"))
        if auto_resume:
            first = result
            result = retry_automatically(st, result, auto_resume, token=token, listener=on_event,
                                         resume=lambda: resume_run(st, first.run_id, retry, token=token,
                                                                   listener=on_event))
        result = _answer_while_asked(st, result, on_question, retry, token=token, listener=on_event)
        return _load(st, result.run_id, result)


def resume(run_id: str, *, answers: Mapping[str, Any] | None = None, force: bool = False,
           store: Store | str | Path | None = None, file: str | Path | None = None, backend: str | None = None,
           script: str | Path | None = None, auto_resume: int = 0, wait: bool = True,
           on_event: OnEvent | None = None, request: ResumeRequest | None = None,
           on_question: OnQuestion | None = None, token: CancelToken | None = None,
           answers_source: str = "answers", engine_options: Mapping[str, Any] | None = None) -> Run:
    """Continue a parked run (a question, a resumable failure, a cancel, an operator pause) from
    its checkpoint under the same id, as ``iterion resume`` does.

    ``run_id``: an id, a unique prefix or the run's name. ``answers``: the paused node's fields,
    ``{"approved": True, "note": "ship it"}`` (or node-keyed, ``{"approve": {...}}``), coerced to
    its output schema. ``force``: accept a workflow source that changed since the run executed it
    (else ``SourceChangedError``). ``file``: the source, when not where the run recorded it.
    ``request``: a ``ResumeRequest`` (``iterion.requests``) instead of its keyword arguments.
    Other parameters as ``run`` (``engine_options`` also takes ``file``).
    """
    from iterion.engine.auto_resume import auto_resume as retry_automatically
    from iterion.engine.cancel import CancelToken
    from iterion.engine.resume import ResumeOptions, resume_run
    from iterion.requests import ResumeRequest

    with _errors():
        if request is None:
            request = ResumeRequest.build(answers=dict(answers or {}), force=force, backend=backend,
                                          file=str(file) if file is not None else None)
        st = _open(store, write=True, skip=run_id)
        script_file = str(Path(script).resolve()) if script is not None else None
        local = dict(engine_options or {})
        options = request.resume_options(request.answers_for_run(st, run_id, answers_source),
                                         script_file=script_file, wait_workspace=wait, **local)
        token = token or CancelToken()
        result = resume_run(st, run_id, options, token=token, listener=on_event)
        # later attempts re-read everything from the run (merged caps, re-stamped source)
        retry = ResumeOptions(file=options.file, backend=request.backend, script_file=script_file,
                              wait_workspace=wait, on_wait=local.get("on_wait"),
                              max_daily_cost_usd=request.max_daily_cost_usd)
        if auto_resume:
            first = result
            result = retry_automatically(st, result, auto_resume, token=token, listener=on_event,
                                         resume=lambda: resume_run(st, first.run_id, retry, token=token,
                                                                   listener=on_event))
        result = _answer_while_asked(st, result, on_question, retry, token=token, listener=on_event)
        return _load(st, result.run_id, result)


def rewind(run_id: str, *, node: str | None = None, auto: bool = False, dry_run: bool = False,
           store: Store | str | Path | None = None, restore_scope: str | None = None,
           file: str | Path | None = None,
           on_detected: Callable[[DetectedEdit], None] | None = None) -> RewindReport:
    """Move a parked run's checkpoint back onto a node it executed and restore the workspace to what
    that node started from, as ``iterion rewind`` does; the next ``resume`` replays from there.

    Give ``node`` (the node to replay from) or ``auto=True`` (after editing the workflow: the
    earliest executed node the edit affects); neither finishes a rewind that was interrupted.
    ``restore_scope``: ``"produced"``, ``"full"`` or ``"none"`` (default: the run's mechanism's).
    ``dry_run``: report what would happen, change nothing. ``on_detected``: shown what ``auto``
    detected (``iterion.rewind.auto_detect.DetectedEdit``) before anything changes.
    """
    from iterion.rewind.files import RestoreScope
    from iterion.rewind.intent import has_intent
    from iterion.rewind.rewind import RewindRequest, rewind_run

    if node and auto:
        raise RefusedError("give exactly one of node= or auto=True",
                           hint="auto=True finds the node your edit affects; node= names it")
    with _errors():
        scope = RestoreScope(restore_scope) if restore_scope is not None else None
        st = _open(store, write=not dry_run)
        if not node and not auto and not has_intent(st, st.resolve_run(run_id)):
            raise RefusedError("give exactly one of node= or auto=True",
                               hint="auto=True finds the node your edit affects; node= names it")
        req = RewindRequest(run_id=run_id, node=node, auto=auto, restore_scope=scope,
                            file=Path(file) if file is not None else None, dry_run=dry_run)
        r = rewind_run(st, req, on_detected=on_detected)
        f = r.files
        return RewindReport(run_id=r.run_id, from_node=r.from_node, to_node=r.to_node,
                            dropped_nodes=tuple(r.dropped_nodes), status=r.status, dry_run=r.dry_run,
                            restored=tuple(f.restored), removed=tuple(f.removed),
                            left_in_place=tuple(f.left_in_place), warnings=tuple(r.warnings),
                            detail=r.to_json())


def undo_rewind(run_id: str, *, store: Store | str | Path | None = None) -> UndoReport:
    """Put back the files and the checkpoint the last rewind of the run changed, as
    ``iterion rewind --undo`` does (refused once the run moved on: ``RewindRefusedError``)."""
    from iterion.rewind.undo import undo_rewind as undo

    with _errors():
        st = _open(store, write=True)
        u = undo(st, run_id)
        return UndoReport(run_id=u.run_id, to_node=u.to_node, checkpoint_node=u.restored_checkpoint_node,
                          status=u.status, restored=tuple(u.files_restored), removed=tuple(u.files_removed),
                          detail=u.to_json())


def _control(outcome: Any) -> ControlReport:
    return ControlReport(run_id=outcome.run_id, action=outcome.action, status=RunStatus(outcome.status),
                         delivered=outcome.delivered, checkpoint_node=outcome.restart_node,
                         message=outcome.message)


def pause(run_id: str, *, reason: str | None = None, wait: float = 30.0,
          store: Store | str | Path | None = None) -> ControlReport:
    """Ask the process executing a ``running`` run to park it ``paused_operator`` at its next node
    boundary (the node in progress finishes), as ``iterion pause`` does; ``resume`` continues it.
    ``wait``: seconds to wait for the run to park (0: just ask; ``delivered`` is then
    ``"pending"``). Refused (``RefusedError``) for a run that is not running, or that no process
    executes any more."""
    from iterion.engine.operator_verbs import pause_run

    with _errors():
        # as `iterion pause`: no free-space reserve asked (a request is a few bytes)
        st = _open(store, write=False)
        return _control(pause_run(st, run_id, wait_s=wait, reason=reason))


def cancel(run_id: str, *, reason: str | None = None, wait: float = 30.0,
           store: Store | str | Path | None = None) -> ControlReport:
    """Cancel a run, as ``iterion cancel`` does: its process stops at once (a running tool is
    killed) and the run stays resumable from its checkpoint; a run no process executes (parked,
    or left ``running`` by a process that is gone) just becomes ``cancelled``. ``wait``: seconds to
    wait for the process to record it (0: just ask)."""
    from iterion.engine.operator_verbs import cancel_run

    with _errors():
        st = _open(store, write=False)  # as `iterion cancel`: works on a nearly full disk too
        return _control(cancel_run(st, run_id, wait_s=wait, reason=reason))


def withdraw_request(run_id: str, *, store: Store | str | Path | None = None) -> None:
    """Withdraw a ``pause``/``cancel`` request the run's process has not acted on (it parked on
    its own first); nothing happens without one. A later resume ignores an older request anyway:
    this keeps the run's directory saying what is really asked."""
    from iterion.engine.control import clear_request

    with _errors():
        st = _open(store, write=False)
        clear_request(st, st.resolve_run(run_id))


def inspect(run_id: str, *, store: Store | str | Path | None = None) -> Run:
    """One run as the store holds it now (``run_id``: an id, a unique prefix or the run's name),
    with ``detail`` and ``interrupted_rewind`` set."""
    with _errors():
        st = _open(store, write=False)
        return _load(st, st.resolve_run(run_id), detail=True)


def runs(*, store: Store | str | Path | None = None, status: RunStatus | str | None = None,
         limit: int | None = None) -> list[RunSummary]:
    """The store's runs, newest first (a run whose document is damaged last, ``corrupt`` set);
    ``status``: only runs in that status; ``limit``: at most that many."""
    from iterion.store.docstore import CorruptRun

    with _errors():
        wanted = RunStatus(status) if status is not None else None
        st = _open(store, write=False)
        out: list[RunSummary] = []
        for r in st.list_summaries():
            if isinstance(r, CorruptRun):
                if wanted is None:
                    out.append(RunSummary(id=r.id, name="", status=None, workflow="", created_at=None,
                                          corrupt=f"{r.detail} ({r.path})"))
            elif wanted is None or r.status is wanted:
                out.append(RunSummary(id=r.id, name=r.name, status=r.status, workflow=r.workflow_name,
                                      created_at=r.created_at, failure_code=r.failure_code))
    out.sort(key=lambda s: (s.created_at is not None, s.created_at.timestamp() if s.created_at else 0.0),
             reverse=True)
    return out[:limit] if limit is not None else out
