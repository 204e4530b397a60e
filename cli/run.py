"""`iterion run`, `iterion resume`, `iterion inspect`, `iterion init`: executing workflows.

Exit codes of run/resume (documented in --help): 0 finished, 1 failed, 4 paused (waiting for a
person or an operator), 5 failed_resumable, 6 cancelled; 2 bad input, 3 internal error.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import typer

from cli.control import sweep_orphans
from cli.errors import EXIT_PROBLEM, CliError
from cli.flags import finite_flag, one_line
from cli.output import echo, echo_err, echo_json, styled, table
from cli.preflight import check_backend, check_launch, check_run_writable, check_script, open_store
from iterion.budget import BudgetAsk, DurationError, parse_duration
from iterion.datafile import DataFileError, read_mapping
from iterion.engine.auto_resume import auto_resume as retry_automatically
from iterion.engine.cancel import CancelToken
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.recovery import OnBudget
from iterion.engine.result import RunResult
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.engine.source import InvalidWorkflow, compile_source
from iterion.rewind.intent import has_intent, inspect_view
from iterion.store import Event, RunDoc, RunStatus, Store, resolve_store_dir
from iterion.store import events as ev
from iterion.store.store import CorruptRun
from iterion.workspace_checkpoint import recovery_hint

EXIT_FINISHED = 0
EXIT_FAILED = 1
EXIT_PAUSED = 4
EXIT_FAILED_RESUMABLE = 5
EXIT_CANCELLED = 6

STATUS_EXIT = {
    RunStatus.FINISHED: EXIT_FINISHED,
    RunStatus.FAILED: EXIT_FAILED,
    RunStatus.PAUSED_WAITING_HUMAN: EXIT_PAUSED,
    RunStatus.PAUSED_OPERATOR: EXIT_PAUSED,
    RunStatus.FAILED_RESUMABLE: EXIT_FAILED_RESUMABLE,
    RunStatus.CANCELLED: EXIT_CANCELLED,
}
EXIT_HELP = ("Exit status: 0 finished, 1 failed, 4 paused (answers needed), 5 failed_resumable, "
             "6 cancelled, 2 bad input.")

STORE_DIR = typer.Option(None, "--store-dir", help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a git repository, else <project>/.iterion).")
JSON = typer.Option(False, "--json", help="Print the result as JSON (no progress display).")
MAX_COST = typer.Option(None, "--max-cost-usd", help="Cap (or raise the cap on) the run's cost in USD.")
MAX_TOKENS = typer.Option(None, "--max-tokens", help="Cap the run's tokens.")
MAX_DURATION = typer.Option(None, "--max-duration", help='Cap the run\'s active time, e.g. "30m", "4h".')
MAX_ITERATIONS = typer.Option(None, "--max-iterations", help="Cap node executions.")
MAX_PARALLEL = typer.Option(None, "--max-parallel-branches", help="Cap concurrent fan-out branches.")
PUSH_EVERY = typer.Option(None, "--push-every", min=1, help="With --push-checkpoints: also push every N completed nodes (env ITERION_PUSH_EVERY, workflow push_every:). Example: --push-every 5")
NO_WAIT = typer.Option(False, "--no-wait", help="In place: refuse (exit 2) instead of waiting while another run "
                                                 "executes in the same workspace. Example: --no-wait")


# -- helpers ------------------------------------------------------------------------------------
def _store(store_dir: Path | None, skip: str | None = None, *, write: bool = False) -> Store:
    # a read-only store is refused before the sweep; stale `running` runs promoted first
    return sweep_orphans(open_store(store_dir, write=write), skip)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise CliError(f"{what} {item!r} is not KEY=VALUE", hint=f"e.g. {what} name=value")
        key, value = item.split("=", 1)
        if not key:
            raise CliError(f"{what} {item!r} has an empty key")
        out[key] = value
    return out


def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    try:
        return read_mapping(path, what)
    except DataFileError as exc:
        raise CliError(str(exc)) from None


def _budget(cost: float | None, tokens: int | None, duration: str | None, iterations: int | None,
            parallel: int | None) -> BudgetAsk | None:
    if all(v is None for v in (cost, tokens, duration, iterations, parallel)):
        return None
    finite_flag(cost, "--max-cost-usd")
    try:
        seconds = parse_duration(duration) if duration else 0.0
    except DurationError as exc:
        raise CliError(str(exc)) from None
    try:
        return BudgetAsk(max_cost_usd=cost or 0.0, max_tokens=tokens or 0, max_duration_s=seconds,
                         max_iterations=iterations or 0, max_parallel_branches=parallel or 0)
    except ValueError as exc:
        raise CliError(f"invalid budget override: {one_line(exc)}") from None


class Progress:
    """One line per node event on stderr: node, status, tokens, cost (user text literal; colour
    only on a terminal; a closed stderr is ignored and the run goes on, see cli/output.py)."""

    def __init__(self) -> None:
        self.started: dict[tuple[str | None, int | None], float] = {}

    def __call__(self, e: Event) -> None:
        p = e.payload
        key = (e.node, e.iteration)
        if e.type == ev.NODE_STARTED:
            self.started[key] = time.monotonic()
            echo_err(styled("▶", "cyan"), f" {e.node} ", styled(f"({p.get('kind')}, iteration {e.iteration})", "dim"))
        elif e.type == ev.NODE_FINISHED:
            took = time.monotonic() - self.started.pop(key, time.monotonic())
            echo_err(styled("✓", "green"), f" {e.node} ",
                     styled(f"{took:.2f}s · run total {p.get('tokens', 0)} tokens, "
                            f"${float(p.get('cost_usd') or 0):.4f}", "dim"))
        elif e.type == ev.NODE_FAILED:
            echo_err(styled("✗", "red"), f" {e.node} ", styled(str(p.get('code')), "red"), f": {p.get('error')}")
        elif e.type == ev.HUMAN_INPUT_REQUESTED or e.type == ev.ASK_USER_REQUESTED:
            echo_err(styled("?", "yellow"), f" {e.node} is waiting for an answer")
        elif e.type == ev.NODE_RETRY_SCHEDULED:
            echo_err(styled("↻", "yellow"), f" {e.node} {p.get('code')}: retry {p.get('attempt')}/"
                     f"{p.get('max_retries')} in {float(p.get('delay_s') or 0):g}s")
        elif e.type == ev.RECOVERY_PAUSED:
            echo_err(styled("?", "yellow"), f" {e.node} {p.get('code')}: paused for a person to fix the cause")
        elif e.type == ev.WARNING:
            echo_err(styled("warning:", "yellow"), f" {p.get('message')}")
        elif e.type == ev.RUN_RESUMED:
            echo_err(styled("↻", "cyan"), f" resuming at {p.get('restart_node')}")
        elif e.type == ev.RUN_WORKSPACE_CHECKPOINT:
            echo_err(styled("↑", "cyan"), f" workspace checkpoint pushed to {p.get('remote')}: {p.get('ref')} ",
                     styled(str(p.get("commit"))[:12], "dim"))
        elif e.type == ev.RUN_WORKSPACE_CHECKPOINT_FAILED:
            echo_err(styled("warning:", "yellow"), f" workspace checkpoint push to {p.get('remote')} failed "
                     f"(the last pushed checkpoint still stands): {p.get('error')}")


def _store_flag(store: Store) -> str:
    """`` --store-dir D`` when a follow-up command run from here would not find this store."""
    return "" if resolve_store_dir(None, Path.cwd()) == store.root else f" --store-dir {store.root}"


def _summary(result: RunResult, store: Store) -> None:
    colour = {"finished": "green", "failed": "red", "failed_resumable": "yellow", "cancelled": "yellow",
              "paused_waiting_human": "yellow"}.get(result.status.value, "bold")
    echo_err()
    echo_err("run ", styled(result.run_id, "bold"), f" ({result.name}): ", styled(result.status.value, colour))
    if result.failure_code or result.error:
        echo_err(f"  {result.failure_code or ''}: {result.error or ''}")
    if result.final_branch:
        merged = f", fast-forwarded {result.merged_into}" if result.merged_into else ""
        echo_err(f"  final tree on branch {result.final_branch}{merged}")
    if result.status is RunStatus.PAUSED_WAITING_HUMAN and result.pending:
        fields = result.pending.get("fields") or []
        if result.pending.get("instructions"):
            echo_err(f"  {result.pending['node']} asks: {result.pending['instructions'].strip()}")
        if result.pending.get("question"):
            echo_err(f"  {result.pending['node']} asks: {result.pending['question']}")
        answers = " ".join(f"--answer {f['name']}=..." for f in fields) or "--answer answer=..."
        echo_err(f"  answer with: iterion resume --run-id {result.run_id}{_store_flag(store)} {answers}")
    elif result.status in (RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED):
        echo_err(f"  resume with: iterion resume --run-id {result.run_id}{_store_flag(store)}"
                   + (" --max-... (raise the cap)" if result.failure_code == "BUDGET_EXCEEDED" else ""))
    echo_err(f"  details: iterion inspect --run-id {result.run_id}{_store_flag(store)}")
    echo_err(f"  stored in: {store.run_dir(result.run_id)}")


def _finish(result: RunResult, store: Store, as_json: bool) -> None:
    if as_json:
        echo_json({**result.to_json(), "stored_in": str(store.run_dir(result.run_id))})
    else:
        _summary(result, store)
    code = STATUS_EXIT.get(result.status, EXIT_FAILED)
    if code:
        raise typer.Exit(code)


def _print_invalid(exc: InvalidWorkflow, as_json: bool) -> None:
    if as_json:
        echo_json({"ok": False, "path": exc.path, "diagnostics": [d.to_json() for d in exc.diagnostics]})
    else:
        for d in exc.diagnostics:
            echo(d.format())


# -- commands ------------------------------------------------------------------------------------
def run_cmd(
    file: Path = typer.Argument(..., help="The workflow: a .bot/.iter file, a bundle directory or a .botz."),
    var: list[str] = typer.Option([], "--var", help="Set a workflow var: --var name=value (repeatable)."),
    preset: str | None = typer.Option(None, "--preset", help="A named preset of var values."),
    backend: str | None = typer.Option(None, "--backend", help="Use this backend for every LLM node (script, openai, claude_code)."),
    script: Path | None = typer.Option(None, "--script", help="Answers file of the script backend (default: <file>.script.yaml beside the workflow)."),
    answers_file: Path | None = typer.Option(None, "--answers-file", help='Human answers known up front: {"node": {"field": value}}.'),
    attach: list[str] = typer.Option([], "--attach", help="Stage a declared attachment: --attach name=path (repeatable)."),
    workspace: Path | None = typer.Option(None, "--workspace", help="Where the run executes in place (default: the current directory)."),
    branch_name: str | None = typer.Option(None, "--branch-name", help="worktree runs: the persistent branch (default iterion/run/<name>)."),
    merge_into: str | None = typer.Option(None, "--merge-into", help="worktree runs: the branch to fast-forward on success (default: the current one)."),
    auto_merge: bool = typer.Option(True, "--auto-merge/--no-auto-merge", help="worktree runs: fast-forward on success."),
    auto_resume: int = typer.Option(0, "--auto-resume", min=0, help="If the run fails with a code the failure table allows (transient), resume it automatically up to N times with bounded backoff. Example: --auto-resume 3"),
    push_checkpoints: str | None = typer.Option(None, "--push-checkpoints", metavar="REMOTE", help="Push the workspace state as a commit under refs/iterion/runs/<run>/checkpoints/<n> to REMOTE (a remote name, URL or path) at every pause, failure, cancel and at the end; kept by every resume. Precedence: this flag > $ITERION_PUSH_CHECKPOINTS > the workflow's push_checkpoints: (an empty value turns pushing off). Example: --push-checkpoints origin"),
    push_every: int | None = PUSH_EVERY,
    on_budget: OnBudget = typer.Option(OnBudget.FAIL, "--on-budget", help="When a budget cap stops a node: fail (park failed_resumable) or pause (a recovery pause: raise the cap and answer acknowledge_recovery on resume); kept by every resume of the run. Example: --on-budget pause"),
    max_cost_usd: float | None = MAX_COST, max_tokens: int | None = MAX_TOKENS, max_duration: str | None = MAX_DURATION,
    max_iterations: int | None = MAX_ITERATIONS, max_parallel_branches: int | None = MAX_PARALLEL,
    store_dir: Path | None = STORE_DIR,
    no_wait: bool = NO_WAIT,
    as_json: bool = JSON,
) -> None:
    """Run a workflow from its entry node, checkpointing after every node.

    Exit status: 0 finished, 1 failed, 4 paused (answers needed), 5 failed_resumable, 6 cancelled, 2 bad input.

    Example: iterion run fixtures/demo/demo.bot --var topic=rivers
    """
    check_launch(workspace, backend, script)  # before the store is opened: nothing exists yet
    store = _store(store_dir, write=True)
    answers: dict[str, dict[str, Any]] = {}
    if answers_file is not None:
        raw = _read_mapping(answers_file, "answers file")
        for node, value in raw.items():
            if not isinstance(value, dict):
                raise CliError(f"answers file {answers_file}: {node} must map fields to values",
                               hint='e.g. {"approve": {"approved": true}}')
            answers[str(node)] = value
    options = LaunchOptions(vars=_pairs(var, "--var"), preset=preset, backend=backend,
                            script_file=str(script.resolve()) if script else None, answers=answers,
                            workspace=workspace, branch_name=branch_name, merge_into=merge_into,
                            auto_merge=auto_merge, on_budget=on_budget.value,
                            wait_workspace=not no_wait, on_wait=echo_err,
                            push_checkpoints=push_checkpoints, push_every=push_every,
                            attachments={k: Path(v) for k, v in _pairs(attach, "--attach").items()},
                            budget=_budget(max_cost_usd, max_tokens, max_duration, max_iterations,
                                           max_parallel_branches))
    try:
        compiled = compile_source(file)
    except InvalidWorkflow as exc:
        _print_invalid(exc, as_json)
        raise
    if not as_json:
        for d in compiled.diagnostics:  # warnings only (errors refuse above)
            echo_err(d.format())
    token = CancelToken()
    listener = None if as_json else Progress()
    result = launch_run(store, file, options, token=token, listener=listener, compiled=compiled)
    retry = ResumeOptions(backend=backend, script_file=options.script_file,
                          wait_workspace=not no_wait, on_wait=echo_err)
    result = retry_automatically(store, result, auto_resume, token=token,
                                 resume=lambda: resume_run(store, result.run_id, retry, token=token,
                                                           listener=listener))
    _finish(result, store, as_json)


def resume_cmd(
    run_id: str = typer.Option(..., "--run-id", help="The run to continue (id, unique prefix or name). Example: --run-id 01a2b3"),
    answer: list[str] = typer.Option([], "--answer", help="Answer a paused human node, coerced to its output schema (repeatable); a file field takes @path (a literal leading @ is written @@). Example: --answer approved=true --answer music=@./theme.mp3"),
    answers_file: Path | None = typer.Option(None, "--answers-file", help="Answers as a JSON object, JSON types kept; --answer flags override its keys. Example: --answers-file answers.json"),
    file: Path | None = typer.Option(None, "--file", help="The workflow source (default: the path recorded at launch). Example: --file workflow.bot"),
    force: bool = typer.Option(False, "--force", help="Resume even though the workflow source changed (both digests are shown when refused). Example: --force"),
    force_stale: bool = typer.Option(False, "--force-stale", help="Take over a `running` run whose owner cannot be proven gone (another host, no start time recorded) once no event was flushed for 60 s; a run whose owner is provably dead on this host is taken over at once without it. Example: --force-stale"),
    auto_resume: int = typer.Option(0, "--auto-resume", min=0, help="Retry up to N times, with bounded exponential backoff, if it fails again with a code the failure table allows (transient; BUDGET_EXCEEDED only under a raised cap). Example: --auto-resume 3"),
    backend: str | None = typer.Option(None, "--backend", help="Re-apply a backend override. Example: --backend script"),
    script: Path | None = typer.Option(None, "--script", help="Answers file of the script backend. Example: --script demo.script.yaml"),
    max_cost_usd: float | None = typer.Option(None, "--max-cost-usd", help="Raise/replace the cost cap in USD (0 inherits; consumed spend stays charged). Example: --max-cost-usd 10"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Raise/replace the token cap (0 inherits). Example: --max-tokens 200000"),
    max_duration: str | None = typer.Option(None, "--max-duration", help="Raise/replace the active-time cap (0 inherits). Example: --max-duration 4h"),
    max_iterations: int | None = typer.Option(None, "--max-iterations", help="Raise/replace the node-execution cap (0 inherits). Example: --max-iterations 50"),
    max_parallel_branches: int | None = typer.Option(None, "--max-parallel-branches", help="Replace the concurrent fan-out branch cap (0 inherits). Example: --max-parallel-branches 4"),
    push_checkpoints: str | None = typer.Option(None, "--push-checkpoints", metavar="REMOTE", help="Push workspace checkpoints to REMOTE from now on, replacing the run's recorded setting (kept by later resumes). Example: --push-checkpoints origin"),
    no_push_checkpoints: bool = typer.Option(False, "--no-push-checkpoints", help="Stop pushing workspace checkpoints for this run (kept by later resumes). Example: --no-push-checkpoints"),
    push_every: int | None = typer.Option(None, "--push-every", min=0, help="Replace the run's periodic push: every N completed nodes (0: only when the run stops). Example: --push-every 5"),
    store_dir: Path | None = typer.Option(None, "--store-dir", help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a git repository, else <project>/.iterion). Example: --store-dir /var/tmp/iterion-store"),
    no_wait: bool = NO_WAIT,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (no progress display). Example: --json"),
) -> None:
    """Continue a paused, failed_resumable or cancelled run from its checkpoint (same run id).

    Exit status: 0 finished, 1 failed, 4 paused (answers needed), 5 failed_resumable, 6 cancelled, 2 bad input.

    Examples:

      iterion resume --run-id 01a2b3

      iterion resume --run-id 01a2b3 --answer approved=true --answer note="ship it"

      iterion resume --run-id 01a2b3 --answers-file answers.json

      iterion resume --run-id 01a2b3 --answer music=@./theme.mp3

      iterion resume --run-id 01a2b3 --file workflow.bot --force

      iterion resume --run-id 01a2b3 --max-cost-usd 10 --auto-resume 3
    """
    check_backend(backend)
    check_script(script)
    if no_push_checkpoints and push_checkpoints is not None:
        raise CliError("--push-checkpoints and --no-push-checkpoints contradict each other", hint="pass one of them")
    store = _store(store_dir, skip=run_id, write=True)  # this run, if orphaned, is taken over by the resume itself
    check_run_writable(store, run_id)
    answers: dict[str, Any] = {}
    if answers_file is not None:
        answers.update(_read_mapping(answers_file, "answers file"))
    answers.update(_pairs(answer, "--answer"))  # explicit flags override the file
    options = ResumeOptions(answers=answers, file=file, force=force, backend=backend, force_stale=force_stale,
                            script_file=str(script.resolve()) if script else None,
                            wait_workspace=not no_wait, on_wait=echo_err,
                            push_checkpoints="" if no_push_checkpoints else push_checkpoints, push_every=push_every,
                            budget=_budget(max_cost_usd, max_tokens, max_duration, max_iterations,
                                           max_parallel_branches))
    token = CancelToken()
    listener = None if as_json else Progress()
    try:
        result = resume_run(store, run_id, options, token=token, listener=listener)
    except InvalidWorkflow as exc:
        _print_invalid(exc, as_json)
        raise
    # --auto-resume: later attempts re-read everything from the run (merged caps, re-stamped source)
    retry_options = ResumeOptions(file=file, backend=backend, script_file=options.script_file,
                          wait_workspace=not no_wait, on_wait=echo_err)
    result = retry_automatically(store, result, auto_resume, token=token,
                                 resume=lambda: resume_run(store, result.run_id, retry_options, token=token,
                                                           listener=listener))
    _finish(result, store, as_json)


def _age(created: datetime) -> str:
    secs = max(0, int((datetime.now(timezone.utc) - created).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def _list_row(r: RunDoc | CorruptRun, store: Store) -> dict[str, Any]:
    if isinstance(r, CorruptRun):
        return {"id": r.id, "name": "-", "status": r.status, "workflow": "-", "age": "-", "failure_code": None,
                "error": f"run.json is corrupt ({r.detail}): {r.path}"}
    return {"id": r.id, "name": r.name, "status": r.status.value, "workflow": r.workflow_name,
            "age": _age(r.created_at), "failure_code": r.failure_code,
            "rewind_interrupted": has_intent(store, r.id)}


def _boundaries(store: Store, doc: Any) -> list[dict[str, Any]]:
    return [{"label": e.payload.get("label"), "state": e.payload.get("state"), "seq": e.seq}
            for e in store.read_events(doc.id) if e.type == ev.BOUNDARY_WRITTEN]


def inspect_cmd(
    run_id: str | None = typer.Option(None, "--run-id", help="Show one run in detail (id, unique prefix or name)."),
    events: bool = typer.Option(False, "--events", help="With --run-id: also print the run's timeline."),
    store_dir: Path | None = STORE_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List runs, or show one run: status, failure, checkpoint node, outputs, boundaries, budget.

    Example: iterion inspect --run-id 01a2b3 --events
    """
    store = _store(store_dir)
    if run_id is None:
        rows = [_list_row(r, store) for r in store.list_entries()]  # an unreadable run.json lists as `corrupt`
        if as_json:
            echo_json(rows)
            return
        if not rows:
            echo(f"no runs in {store.root}")
            return
        for line in table(("id", "name", "status", "workflow", "age"),
                          [(r["id"], r["name"], f"{r['status']}{' (rewind interrupted)' if r.get('rewind_interrupted') else ''}",
                            r["workflow"], r["age"]) for r in rows]):
            echo(line)
        return
    rid = store.resolve_run(run_id)
    doc = store.load_run(rid)
    cp = store.load_checkpoint(rid)
    detail: dict[str, Any] = {
        "id": doc.id, "name": doc.name, "status": doc.status.value, "workflow": doc.workflow_name,
        "file": doc.file_path, "digest": doc.workflow_digest, "failure_code": doc.failure_code, "error": doc.error,
        "workspace": doc.workspace_dir, "mode": doc.workspace_mode.value,
        "worktree": doc.worktree.model_dump() if doc.worktree else None,
        "checkpoint_node": cp.restart_node if cp else None,
        "anchor": cp.anchor_reason.value if cp else None,
        "pending": cp.pending_interaction.model_dump() if cp and cp.pending_interaction else None,
        "outputs": cp.outputs if cp else {},
        "executed": [f"{e.node}:{e.iteration}" for e in cp.executed] if cp else [],
        "budget": {"caps": doc.budget.model_dump(), "consumed": cp.accounting.model_dump() if cp else None},
        "boundaries": _boundaries(store, doc),
    }
    detail["interrupted_rewind"], interrupted = inspect_view(store, rid)
    if doc.final_commit:
        detail["final_branch"], detail["final_commit"] = doc.final_branch, doc.final_commit
    hint = recovery_hint(store, rid)  # an unreadable timeline is an error, never an absent hint
    if hint is not None:
        detail["workspace_checkpoint"] = hint
    timeline = store.read_events(rid) if events else []
    if as_json:
        if events:
            detail["events"] = [e.model_dump(mode="json") for e in timeline]
        echo_json(detail)
        return
    echo(styled(doc.id, "bold"), f" ({doc.name})  {doc.status.value}  workflow {doc.workflow_name}")
    if doc.failure_code or doc.error:
        echo(f"failure: {doc.failure_code}: {doc.error}")
    if interrupted:
        echo(interrupted)
    echo(f"workspace: {doc.workspace_dir} ({doc.workspace_mode.value})")
    echo(f"checkpoint node: {detail['checkpoint_node']} ({detail['anchor']})")
    if detail["pending"]:
        echo(f"waiting on: {detail['pending']['node']} ({detail['pending']['kind']})")
        asks = (detail["pending"].get("questions") or {}).get("instructions")
        if asks:
            echo(f"  asks: {str(asks).strip()}")
    echo("executed: " + (" ".join(detail["executed"]) or "-"))
    consumed = detail["budget"]["consumed"] or {}
    echo(f"budget consumed: tokens {consumed.get('tokens', 0)}, cost ${consumed.get('cost_usd', 0):.4f}, "
              f"iterations {consumed.get('iterations', 0)}, active {consumed.get('active_duration_s', 0):.2f}s")
    echo("boundaries: " + (" ".join(b["label"] for b in detail["boundaries"]) or "-"))
    if doc.final_commit:
        echo(f"final state: {doc.final_commit}" + (f" on branch {doc.final_branch}" if doc.final_branch else ""))
    if hint is not None:
        echo(f"workspace checkpoint: {hint['ref']} = {hint['commit']} (pushed to {hint['remote']} at {hint['time']})")
        echo(f"  fetch (in a clone whose origin is that repository): {hint['fetch_command']}")
        echo(f"  verify: {hint['verify']}")
    for node, output in detail["outputs"].items():
        echo(f"  {node}: {json.dumps(output, ensure_ascii=False)[:160]}")
    for e in timeline:
        echo(f"{e.seq:>4} {e.time:%H:%M:%S} {e.type:<22} {e.node or '':<14} {json.dumps(e.payload, ensure_ascii=False)[:120]}")


def _demo_source() -> Path:
    import iterion

    here = Path(iterion.__file__).resolve().parent.parent / "fixtures" / "demo"
    if not here.is_dir():
        raise CliError("the demo project is not available in this installation",
                       hint="install iterion from a source checkout (pip install -e .)", exit_code=EXIT_PROBLEM)
    return here


def init_cmd(
    directory: Path = typer.Argument(Path("iterion-demo"), help="Where to create the demo project."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Scaffold a demo project (a workflow plus the script backend's answers) you can run at once.

    Example: iterion init my-demo && cd my-demo && iterion run demo.bot
    """
    src = _demo_source()
    if directory.exists() and any(directory.iterdir()):
        raise CliError(f"{directory} exists and is not empty", hint="choose a new directory")
    directory.mkdir(parents=True, exist_ok=True)
    copied = []
    for item in sorted(src.iterdir()):
        if item.name.startswith(".") or item.name == "__pycache__":
            continue
        target = directory / item.name
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy2(item, target)
        copied.append(item.name)
    if as_json:
        echo_json({"directory": str(directory.resolve()), "files": copied})
        return
    echo(f"created {directory}: {', '.join(copied)}")
    echo(f"next: cd {directory} && iterion run demo.bot")


def register(app: typer.Typer) -> None:
    app.command("run", epilog=EXIT_HELP)(run_cmd)
    app.command("resume", epilog=EXIT_HELP)(resume_cmd)
    app.command("inspect")(inspect_cmd)
    app.command("init")(init_cmd)
