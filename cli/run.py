"""`iterion run`, `iterion resume`, `iterion init`: executing workflows (`iterion inspect`: cli/inspect_cmd.py).

Exit codes of run/resume: the table in cli/exit_codes.py (shown in --help and the README).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.control import announce_new_store
from cli.errors import CliError
from cli.exit_codes import EXIT_HELP, STATUS_EXIT, ExitCode
from cli.flags import key_values
from cli.output import echo, echo_err, echo_json, styled
from cli.parked import answer_command, field_line, inspect_command, resume_command, store_args, stored_in
from cli.preflight import (
    check_backend,
    check_backends_usable,
    check_launch,
    check_model,
    check_run_writable,
    check_script,
)
from cli.progress import Progress, notices_only
from cli.prompting import NO_INPUT, ask_before_resume
from cli.scaffold import merge_skipped_reason, next_step, scaffold
from cli.storeopts import NATS, STORE_DIR, open_swept
from iterion.budget import OnBudget
from iterion.store import RunStatus, Store

if TYPE_CHECKING:  # the engine and the DSL are imported by run/resume when they run: `inspect` lists without them
    from iterion.api import Run

JSON = typer.Option(False, "--json", help="Print the result as JSON (no progress display).")
MAX_COST = typer.Option(None, "--max-cost-usd", help="Cap (or raise the cap on) the run's cost in USD.")
MAX_TOKENS = typer.Option(None, "--max-tokens", help="Cap the run's tokens.")
MAX_DURATION = typer.Option(None, "--max-duration", help='Cap the run\'s active time, e.g. "30m", "4h".')
MAX_ITERATIONS = typer.Option(None, "--max-iterations", help="Cap node executions.")
MAX_PARALLEL = typer.Option(None, "--max-parallel-branches", help="Cap concurrent fan-out branches.")
PERMISSION = typer.Option(None, "--permission", help="Tool-permission mode for agent tool calls no rule matches: allow, ask (pause for a person) or deny. Example: --permission ask")
PERMISSION_ALLOW = typer.Option([], "--permission-allow", help="Allow tool calls matching RULE = TOOL or TOOL(PATTERN) (repeatable). Example: --permission-allow 'bash(git *)' --permission-allow 'write_file(docs/**)'")
PERMISSION_ASK = typer.Option([], "--permission-ask", help="Pause for a person before tool calls matching RULE (repeatable). Example: --permission-ask 'bash(*)'")
SANDBOX = typer.Option(None, "--sandbox", metavar="auto|none", help="Run tool commands, the claw agent's bash and agent CLIs inside a sandbox (auto: bubblewrap; host read-only, workspace writable, private /tmp, no network unless the workflow's sandbox: block opens it) or without one (none); wins over the workflow's sandbox:. Example: --sandbox auto")
PERMISSION_DENY = typer.Option([], "--permission-deny", help="Refuse tool calls matching RULE; the agent gets a tool error (repeatable). Example: --permission-deny 'mcp.github.*'")
PUSH_EVERY = typer.Option(None, "--push-every", min=1, help="With --push-checkpoints: also push every N completed nodes (env ITERION_PUSH_EVERY, workflow push_every:). Example: --push-every 5")
NO_WAIT = typer.Option(False, "--no-wait", help="In place: refuse (exit 2) instead of waiting while another run "
                                                 "executes in the same workspace. Example: --no-wait")


# -- helpers ------------------------------------------------------------------------------------
def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    from iterion.datafile import DataFileError, read_mapping

    try:
        return read_mapping(path, what)
    except DataFileError as exc:
        raise CliError(str(exc)) from None


def _summary(run: Run, store: Store) -> None:
    colour = {"finished": "green", "failed": "red", "failed_resumable": "yellow", "cancelled": "yellow",
              "paused_waiting_human": "yellow"}.get(run.status.value, "bold")
    echo_err()
    echo_err("run ", styled(run.id, "bold"), f" ({run.name}): ", styled(run.status.value, colour))
    if run.failure_code or run.error:
        echo_err(f"  {run.failure_code or ''}: {run.error or ''}")
    if run.final_branch:
        merged = f", fast-forwarded {run.merged_into}" if run.merged_into else ""
        echo_err(f"  final tree on branch {run.final_branch}{merged}")
        if not run.merged_into:
            echo_err(f"  did not fast-forward: {merge_skipped_reason(store, run.id)}")
    where = store_args(store)
    ref = run.name or run.id  # hints print the name (unique in the store)
    pending = dict(run.pending) if run.pending else None
    if run.status is RunStatus.PAUSED_WAITING_HUMAN and pending:
        if pending.get("instructions"):
            echo_err(f"  {pending['node']} asks: {pending['instructions'].strip()}")
        if pending.get("question"):
            echo_err(f"  {pending['node']} asks: {pending['question']}")
        for f in pending.get("fields") or []:
            echo_err(f"    {field_line(f)}")
        echo_err(f"  answer with: {answer_command(ref, pending, where)}")
    elif run.status in (RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED, RunStatus.PAUSED_OPERATOR):
        echo_err(f"  resume with: {resume_command(ref, run.failure_code, run.error, where)}")
    echo_err(f"  details: {inspect_command(ref, where)}")
    echo_err(f"  stored in: {stored_in(store, run.id)}")


def _finish(run: Run, store: Store, as_json: bool) -> None:
    if as_json:
        assert run.result is not None  # run/resume always carry the engine's result
        echo_json({**run.result.to_json(), "stored_in": str(run.stored_in)})
    else:
        _summary(run, store)
    code = STATUS_EXIT.get(run.status, ExitCode.FAILED)
    if code:
        raise typer.Exit(code)


def _print_invalid(path: str, lines: Sequence[str], details: Sequence[Mapping[str, Any]], as_json: bool) -> None:
    """A workflow that does not compile: its diagnostics, one line each (or as JSON)."""
    if as_json:
        echo_json({"ok": False, "path": path, "diagnostics": list(details)})
    else:
        for line in lines:
            echo(line)


def terminal_answerer(no_input: bool) -> Callable[[Mapping[str, Any]], dict[str, Any] | None]:
    """The API's ``on_question`` of run/resume: while stdin and stdout are a terminal (and not
    ``no_input``), ask the paused gate's questions there; None (stay parked) otherwise."""
    from cli.prompting import Stop, ask, interactive

    def answer(pending: Mapping[str, Any]) -> dict[str, Any] | None:
        if not interactive(no_input):
            return None
        try:
            return ask(dict(pending))
        except Stop:
            echo(styled("  not answered: the run stays parked", "dim"))
            return None

    return answer


# -- commands ------------------------------------------------------------------------------------
def run_cmd(
    file: Path = typer.Argument(..., help="The workflow: a .bot/.iter file, a bundle directory or a .botz."),
    var: list[str] = typer.Option([], "--var", help="Set a workflow var: --var name=value (repeatable)."),
    preset: str | None = typer.Option(None, "--preset", help="A named preset of var values."),
    backend: str | None = typer.Option(None, "--backend", help="Use this backend for every LLM node (script, openai, claw, claude_code, codex)."),
    model: str | None = typer.Option(None, "--model", help="Use this model for every LLM call (replaces the nodes' model:; kept by every resume unless replaced). Example: --model openai/gpt-4o-mini"),
    script: Path | None = typer.Option(None, "--script", help="Answers file of the script backend (default: <file>.script.yaml beside the workflow)."),
    answers_file: Path | None = typer.Option(None, "--answers-file", help='Human answers known up front: {"node": {"field": value}}, or {"field": value} when the workflow has one human node.'),
    attach: list[str] = typer.Option([], "--attach", help="Stage a declared attachment: --attach name=path (repeatable)."),
    workspace: Path | None = typer.Option(None, "--workspace", help="Where the run executes in place (default: the current directory)."),
    branch_name: str | None = typer.Option(None, "--branch-name", help="worktree runs: the persistent branch (default iterion/run/<name>)."),
    merge_into: str | None = typer.Option(None, "--merge-into", help="worktree runs: the branch to fast-forward on success (default: the current one)."),
    auto_merge: bool = typer.Option(True, "--auto-merge/--no-auto-merge", help="worktree runs: fast-forward on success."),
    auto_resume: int = typer.Option(0, "--auto-resume", min=0, help="If the run fails with a code the failure table allows (transient), resume it automatically up to N times with bounded backoff. Example: --auto-resume 3"),
    permission: str | None = PERMISSION,
    permission_allow: list[str] = PERMISSION_ALLOW,
    permission_ask: list[str] = PERMISSION_ASK,
    permission_deny: list[str] = PERMISSION_DENY,
    sandbox: str | None = SANDBOX,
    push_checkpoints: str | None = typer.Option(None, "--push-checkpoints", metavar="REMOTE", help="Push the workspace state as a commit under refs/iterion/runs/<run>/checkpoints/<n> to REMOTE (a remote name, URL or path) at every pause, failure, cancel and at the end; kept by every resume. Precedence: this flag > $ITERION_PUSH_CHECKPOINTS > the workflow's push_checkpoints: (an empty value turns pushing off). Example: --push-checkpoints origin"),
    push_every: int | None = PUSH_EVERY,
    on_budget: OnBudget = typer.Option(OnBudget.FAIL, "--on-budget", help="When a budget cap stops a node: fail (park failed_resumable) or pause (a recovery pause: raise the cap and answer acknowledge_recovery on resume); kept by every resume of the run. Example: --on-budget pause"),
    max_cost_usd: float | None = MAX_COST, max_tokens: int | None = MAX_TOKENS, max_duration: str | None = MAX_DURATION,
    max_iterations: int | None = MAX_ITERATIONS, max_parallel_branches: int | None = MAX_PARALLEL,
    store_dir: Path | None = STORE_DIR,
    nats: str | None = NATS,
    no_wait: bool = NO_WAIT,
    no_input: bool = NO_INPUT,
    as_json: bool = JSON,
) -> None:
    """Run a workflow from its entry node, checkpointing after every node.

    Exit status: 0 finished, 1 failed, 2 refused (bad input, invalid workflow), 3 internal error, 4 waiting for answers, 5 failed_resumable, 6 cancelled, 8 paused_operator.

    Example: iterion run fixtures/demo/demo.bot --var topic=rivers
    """
    from iterion import api
    from iterion.engine.recovery import check_env_settings
    from iterion.engine.source import InvalidWorkflow, compile_source
    from iterion.requests import Budget, LaunchRequest
    from iterion.sandbox import check_flag

    check_launch(workspace, backend, script)  # before the store is opened: nothing exists yet
    sandbox_mode = check_flag(sandbox)
    check_env_settings(auto_resume=auto_resume > 0)  # garbage backoff seconds: refused up front
    # the request the HTTP API and `iterion remote` send too (iterion/requests.py): one set of rules
    request = LaunchRequest.build(
        file=str(file), workspace=str(workspace) if workspace is not None else None,
        vars=dict(key_values(var, "--var")), preset=preset, backend=backend, model=check_model(model),
        script=str(script.resolve()) if script else None,
        answers=_read_mapping(answers_file, "answers file") if answers_file is not None else {},
        attachments=key_values(attach, "--attach", "name=path") or None,
        budget=Budget.from_flags(max_cost_usd, max_tokens, max_duration, max_iterations, max_parallel_branches),
        on_budget=on_budget.value, branch_name=branch_name, merge_into=merge_into, auto_merge=auto_merge)
    if request.budget:
        request.budget.ask()  # an invalid cap: refused before the store opens
    # the store is looked up from where the command runs, as every other command looks it up
    # (a `resume` from the same directory finds the run)
    store = open_swept(store_dir, write=True, nats=nats)
    announce_new_store(store, Path.cwd())
    try:
        compiled = compile_source(file)
    except InvalidWorkflow as exc:
        _print_invalid(exc.path, [d.format() for d in exc.diagnostics], [d.to_json() for d in exc.diagnostics],
                       as_json)
        raise
    # the command line's own mistakes first (a malformed permission rule), then this machine's
    permission_layer = _permission("launch", permission, permission_allow, permission_ask, permission_deny)
    check_backends_usable(compiled.workflow, file, backend, script)  # before the run exists
    if not as_json:
        for d in compiled.diagnostics:  # warnings only (errors refuse above)
            echo_err(d.format())
    # one path from the request to the engine: iterion.api (the answers file's shape, node-keyed
    # or flat for the one human node, is the request's rule)
    outcome = api.run(
        request=request, store=store, compiled=compiled, answers_source=f"answers file {answers_file}",
        wait=not no_wait, auto_resume=auto_resume, on_event=notices_only if as_json else Progress(),
        on_question=terminal_answerer(no_input or as_json),
        engine_options={"on_wait": echo_err, "push_checkpoints": push_checkpoints, "push_every": push_every,
                        "permission": permission_layer,
                        "sandbox": sandbox_mode})
    _finish(outcome, store, as_json)


def resume_cmd(
    run_id: str = typer.Option(..., "--run-id", help="The run to continue (id, unique prefix or name). Example: --run-id 01a2b3"),
    answer: list[str] = typer.Option([], "--answer", help="Answer a paused human node, coerced to its output schema (repeatable); a file field takes @path (a literal leading @ is written @@). Example: --answer approved=true --answer music=@./theme.mp3"),
    answers_file: Path | None = typer.Option(None, "--answers-file", help="Answers as JSON (or YAML), JSON types kept: {\"field\": value} for the paused node, or node-keyed {\"node\": {\"field\": value}} as run takes it; --answer flags override its keys. Example: --answers-file answers.json"),
    file: Path | None = typer.Option(None, "--file", help="The workflow source (default: the path recorded at launch). Example: --file workflow.bot"),
    force: bool = typer.Option(False, "--force", help="Resume even though the workflow source changed (both digests are shown when refused). Example: --force"),
    force_stale: bool = typer.Option(False, "--force-stale", help="Take over a `running` run whose owner cannot be proven gone (another host, no start time recorded) once no event was flushed for 60 s; a run whose owner is provably dead on this host is taken over at once without it. Example: --force-stale"),
    auto_resume: int = typer.Option(0, "--auto-resume", min=0, help="Retry up to N times, with bounded exponential backoff, if it fails again with a code the failure table allows (transient; BUDGET_EXCEEDED only under a raised cap). Example: --auto-resume 3"),
    backend: str | None = typer.Option(None, "--backend", help="Re-apply a backend override. Example: --backend script"),
    model: str | None = typer.Option(None, "--model", help="Use this model for every LLM call from now on (replaces the launch's --model and the nodes' model:; kept by later resumes unless replaced). Example: --model openai/gpt-4o"),
    script: Path | None = typer.Option(None, "--script", help="Answers file of the script backend. Example: --script demo.script.yaml"),
    max_cost_usd: float | None = typer.Option(None, "--max-cost-usd", help="Raise/replace the cost cap in USD (0 inherits; consumed spend stays charged). Example: --max-cost-usd 10"),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Raise/replace the token cap (0 inherits). Example: --max-tokens 200000"),
    max_duration: str | None = typer.Option(None, "--max-duration", help="Raise/replace the active-time cap (0 inherits). Example: --max-duration 4h"),
    max_iterations: int | None = typer.Option(None, "--max-iterations", help="Raise/replace the node-execution cap (0 inherits). Example: --max-iterations 50"),
    max_parallel_branches: int | None = typer.Option(None, "--max-parallel-branches", help="Replace the concurrent fan-out branch cap (0 inherits). Example: --max-parallel-branches 4"),
    max_daily_cost_usd: float | None = typer.Option(None, "--max-daily-cost-usd", min=0, help="The store's daily spend cap in USD for this resume (replaces $ITERION_DAILY_COST_CAP_USD; 0: no cap); a run parked by the daily cap resumes only under a cap above today's spend. Example: --max-daily-cost-usd 50"),
    permission: str | None = PERMISSION,
    permission_allow: list[str] = typer.Option([], "--permission-allow", help="Allow tool calls matching RULE (repeatable); added over the launch's rules, so it can authorize the call a run paused on. Example: --permission-allow 'bash(git push *)'"),
    permission_ask: list[str] = PERMISSION_ASK,
    permission_deny: list[str] = PERMISSION_DENY,
    sandbox: str | None = typer.Option(None, "--sandbox", metavar="auto|none", help="Replace the run's sandbox choice from now on (kept by later resumes): auto (bubblewrap) or none; each resume starts fresh sandboxes. Example: --sandbox none"),
    push_checkpoints: str | None = typer.Option(None, "--push-checkpoints", metavar="REMOTE", help="Push workspace checkpoints to REMOTE from now on, replacing the run's recorded setting (kept by later resumes). Example: --push-checkpoints origin"),
    no_push_checkpoints: bool = typer.Option(False, "--no-push-checkpoints", help="Stop pushing workspace checkpoints for this run (kept by later resumes). Example: --no-push-checkpoints"),
    push_every: int | None = typer.Option(None, "--push-every", min=0, help="Replace the run's periodic push: every N completed nodes (0: only when the run stops). Example: --push-every 5"),
    store_dir: Path | None = typer.Option(None, "--store-dir", help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a git repository, else <project>/.iterion). Example: --store-dir /var/tmp/iterion-store"),
    nats: str | None = NATS,
    no_wait: bool = NO_WAIT,
    no_input: bool = NO_INPUT,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (no progress display). Example: --json"),
) -> None:
    """Continue a paused, failed_resumable or cancelled run from its checkpoint (same run id).

    Exit status: 0 finished, 1 failed, 2 refused (bad input, invalid workflow), 3 internal error, 4 waiting for answers, 5 failed_resumable, 6 cancelled, 8 paused_operator.

    Examples:

      iterion resume --run-id 01a2b3

      iterion resume --run-id 01a2b3 --answer approved=true --answer note="ship it"

      iterion resume --run-id 01a2b3 --answers-file answers.json

      iterion resume --run-id 01a2b3 --answer music=@./theme.mp3

      iterion resume --run-id 01a2b3 --file workflow.bot --force

      iterion resume --run-id 01a2b3 --max-cost-usd 10 --auto-resume 3
    """
    from iterion import api
    from iterion.engine.recovery import check_env_settings
    from iterion.requests import Budget, ResumeRequest
    from iterion.sandbox import check_flag

    check_backend(backend)
    sandbox_mode = check_flag(sandbox)
    check_script(script)
    check_env_settings(auto_resume=auto_resume > 0)  # garbage backoff seconds: refused up front
    if no_push_checkpoints and push_checkpoints is not None:
        raise CliError("--push-checkpoints and --no-push-checkpoints contradict each other", hint="pass one of them")
    store = open_swept(store_dir, skip=run_id, write=True, nats=nats)  # this run, if orphaned, is taken over by the resume itself
    check_run_writable(store, run_id)
    request = ResumeRequest.build(
        answers=_read_mapping(answers_file, "answers file") if answers_file is not None else {},
        file=str(file) if file is not None else None, force=force, force_stale=force_stale or None,
        backend=backend, model=check_model(model),
        budget=Budget.from_flags(max_cost_usd, max_tokens, max_duration, max_iterations, max_parallel_branches),
        max_daily_cost_usd=max_daily_cost_usd)
    # the answers file's shape (flat, or node-keyed as `run` takes it) is the request's rule
    source = f"answers file {answers_file}"
    answers = request.answers_for_run(store, run_id, source)
    answers.update(key_values(answer, "--answer", "approved=true"))  # explicit flags override the file
    if not answers and not (permission or permission_allow or permission_ask or permission_deny):
        answers.update(ask_before_resume(store, run_id, no_input=no_input or as_json))  # on a terminal
    try:
        outcome = api.resume(
            run_id, request=request.model_copy(update={"answers": answers}), store=store, answers_source=source,
            script=script, wait=not no_wait, auto_resume=auto_resume,
            on_event=notices_only if as_json else Progress(), on_question=terminal_answerer(no_input or as_json),
            engine_options={"file": file, "on_wait": echo_err,
                            "push_checkpoints": "" if no_push_checkpoints else push_checkpoints,
                            "push_every": push_every,
                            "permission": _permission("resume", permission, permission_allow, permission_ask,
                                                      permission_deny),
                            "sandbox": sandbox_mode})
    except api.InvalidWorkflowError as exc:
        _print_invalid(exc.path or "", exc.diagnostics, exc.diagnostic_details, as_json)
        raise
    _finish(outcome, store, as_json)


def _permission(source: str, mode: str | None, allow: list[str], ask: list[str],
                deny: list[str]) -> dict[str, Any] | None:
    """The --permission* flags as one policy layer (None when none was given); a bad rule or
    mode is refused here, before anything is written."""
    if mode is None and not (allow or ask or deny):
        return None
    from iterion.permissions import flags_layer, layer_to_json

    return layer_to_json(flags_layer(source, mode, allow, ask, deny))


def init_cmd(
    directory: Path = typer.Argument(Path("iterion-demo"), help="Where to create the demo project; an existing "
                                     "project gets the starter workflow added, its other files untouched."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Scaffold a demo project (a workflow plus the script backend's answers) you can run at once.

    Example: iterion init my-demo && cd my-demo && iterion run demo.bot
    """
    copied = scaffold(directory)
    if as_json:
        echo_json({"directory": str(directory.resolve()), "files": copied})
        return
    echo(f"created {directory}: {', '.join(copied)}")
    echo(f"next: {next_step(directory)}")  # pastes as printed, after its own cd too


def register(app: typer.Typer) -> None:
    app.command("run", epilog=EXIT_HELP)(run_cmd)
    app.command("resume", epilog=EXIT_HELP)(resume_cmd)
    app.command("init")(init_cmd)
