"""`iterion dev FILE`: the bot author's loop in one command (issue 34, point 1).

It starts a run of FILE (or attaches to a parked run of it with ``--run-id``), shows its progress,
and watches FILE and every file it imports or includes (cli/dev_watch.py). On each save:

1. validate, printing the diagnostics as `iterion validate` does; an invalid file changes nothing;
2. the `rewind --auto --dry-run` report: the declaration diff, the node it rewinds to, the files
   it would put back (cli/rewind.py prints it, iterion/rewind computes it);
3. the rewind, then a resume with ``--force`` (``--confirm`` asks first; files the rewind would
   overwrite that the run did not write - a person's edits - are always asked about).

A save while a node runs is applied at the next node boundary: dev asks for a pause as
`iterion pause` does (iterion/engine/operator_verbs.py) and rewinds once the run has parked;
the node is never killed. At a human gate the question is shown; Enter asks its fields at the
terminal (cli/prompting.py). ``q`` quits and leaves the run parked and resumable; Ctrl-C cancels
the run (resumable), a second Ctrl-C stops at once and the run is moved to ``cancelled``, never
left ``running``. A dev session only ever rewinds the one run it started or attached to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.dev_watch import DEBOUNCE_S, Watch
from cli.errors import CliError
from cli.exit_codes import ExitCode
from cli.output import echo, echo_err, styled
from cli.storeopts import STORE_DIR
from gitrefs.persist import UserError

if TYPE_CHECKING:
    from iterion.engine.result import RunResult
    from iterion.engine.resume import ResumeOptions
    from iterion.store import Store

HELP = """Start (or attach to) a run of FILE, watch FILE and what it imports/includes, and on each
save validate, rewind to the node the edit affects (`rewind --auto`) and resume with --force.

\b
Keys (type, then Enter): Enter answers a waiting gate or resumes a parked run; q quits, leaving
the run parked and resumable. Ctrl-C cancels the run (resumable); twice stops at once.

\b
Examples:
  iterion dev review.bot --var topic=rivers
  iterion dev review.bot --confirm            # ask before each rewind
  iterion dev review.bot --run-id RUN         # attach to a parked run of review.bot
"""


class Session:
    """One dev session: the run it owns, and how it executes, rewinds and resumes it."""

    def __init__(self, store: Store, file: Path, run_id: str, options: ResumeOptions, *, confirm: bool,
                 debounce_s: float) -> None:
        from cli.progress import Progress
        from iterion.engine.cancel import CancelToken

        self.store, self.file, self.run_id, self.options = store, file, run_id, options
        self.confirm = confirm
        self.token = CancelToken()
        self.listener = Progress()
        self.watch = Watch(file, debounce_s=debounce_s)
        self.pending_save = False
        self.quit = False

    # -- executing, with the watch running beside it ----------------------------------------------
    def _pause(self, why: str) -> None:
        from iterion.engine.operator_verbs import pause_run

        try:
            pause_run(self.store, self.run_id, wait_s=0, reason=why)
        except Exception:  # noqa: BLE001 - not running any more: the main loop sees the save/quit itself
            return
        echo_err(styled(f"  {why}: pausing at the next node boundary", "dim"))

    def execute(self, call: Callable[[], RunResult]) -> RunResult:
        """Run ``call`` (a launch or resume) while saves and ``q`` are watched for; a save or a
        ``q`` asks the run to pause at its next node boundary."""
        from iterion.engine.control import clear_request

        stop = threading.Event()

        def monitor() -> None:
            while not stop.is_set():
                event = self.watch.wait(stop)
                if event.kind == "save" and not self.pending_save:
                    self.pending_save = True
                    self._pause("a workflow file was saved")
                elif event.kind == "line" and event.text == "q" and not self.quit:
                    self.quit = True
                    self._pause("quitting")

        thread = threading.Thread(target=monitor, name="iterion-dev-watch", daemon=True)
        thread.start()
        try:
            return call()
        except KeyboardInterrupt:  # a second Ctrl-C: the engine did not wait for the cancel
            self._never_running()
            raise
        finally:
            stop.set()
            thread.join()
            clear_request(self.store, self.run_id)  # a pause the run ended before seeing

    def _never_running(self) -> None:
        """After an abrupt stop, the run is not left ``running`` (its lock was released as the
        stack unwound: the cancel moves the status directly)."""
        from iterion.engine.operator_verbs import cancel_run
        from iterion.store import RunStatus

        try:
            if self.store.load_run(self.run_id).status is RunStatus.RUNNING:
                cancel_run(self.store, self.run_id, wait_s=0, reason="iterion dev: interrupted twice")
        except Exception as exc:  # noqa: BLE001 - reported; the run is then promoted by the next sweep
            echo_err(f"warning: could not record the cancel of run {self.run_id}: {exc}")

    def resume(self, answers: dict[str, Any] | None = None) -> RunResult:
        from iterion.engine.resume import resume_run

        opts = replace(self.options, answers=answers or {})
        return self.execute(lambda: resume_run(self.store, self.run_id, opts, token=self.token,
                                               listener=self.listener))

    # -- a save ------------------------------------------------------------------------------------
    def apply_save(self, result: RunResult) -> RunResult:
        from cli.prompting import Stop, interactive, yes_no
        from cli.rewind import print_files, print_result
        from cli.validate import check
        from iterion.rewind.errors import AutoRefusedError
        from iterion.rewind.rewind import RewindRequest, rewind_run
        from iterion.store import RunStatus

        echo()
        echo(styled("saved:", "bold"), " validating")
        if check([self.file], False):
            echo(styled("  invalid: nothing changed; waiting for the next save", "yellow"))
            return result
        self.watch.rescan()  # the unit as it is now (an import added or removed)
        status = self.store.load_run(self.run_id).status
        if status is RunStatus.FINISHED:
            echo(styled("  the run finished: a finished run cannot be rewound; start a new `iterion dev`",
                        "yellow"))
            return result
        try:
            dry = rewind_run(self.store, RewindRequest(run_id=self.run_id, auto=True, file=self.file,
                                                       dry_run=True), on_detected=_print_detected)
        except AutoRefusedError as exc:
            echo(styled(f"  rewind --auto: {exc.message}", "yellow"))
            if status in (RunStatus.PAUSED_OPERATOR, RunStatus.FAILED_RESUMABLE) and "resume" in (exc.hint or ""):
                echo("  nothing to rewind: resuming the edited workflow from the checkpoint (--force)")
                return self.resume()
            return result
        except UserError as exc:
            echo(styled(f"  rewind --auto refused: {exc.message}", "yellow"))
            if exc.hint:
                echo(f"  hint: {exc.hint}")
            return result
        report = dry.to_json()
        print_result(report, "", "")
        overwritten = report["files"].get("overwritten") or []
        if self.confirm or overwritten:
            why = " (it overwrites files the run did not write)" if overwritten else ""
            if not interactive(False):
                echo(styled(f"  not applied{why}: no terminal to ask; save again to retry", "yellow"))
                return result
            try:
                go = yes_no(f"rewind to {report['to_node']} and resume{why}?")
            except Stop:
                go = False
            if not go:
                echo("  not applied; waiting for the next save")
                return result
        done = rewind_run(self.store, RewindRequest(run_id=self.run_id, auto=True, file=self.file))
        r = done.to_json()
        echo(f"rewound to {r['to_node']}; dropped outputs: {', '.join(r.get('dropped_nodes') or [])}")
        print_files(r["files"], False)
        echo(styled("resuming with --force", "dim"))
        return self.resume()

    # -- the loop ----------------------------------------------------------------------------------
    def show(self, result: RunResult) -> None:
        from iterion.store import RunStatus

        status = result.status
        echo()
        if status is RunStatus.PAUSED_WAITING_HUMAN and result.pending:
            p = result.pending
            for key in ("instructions", "question"):
                if p.get(key):
                    echo(styled("?", "yellow"), f" {p['node']} asks: {str(p[key]).strip()}")
            echo(styled("waiting: Enter answers the gate, a save applies the edit, q quits", "bold"))
        elif status is RunStatus.FINISHED:
            echo(styled(f"run {result.name} finished; ", "green"), "q quits")
        else:
            extra = f" ({result.failure_code}: {result.error})" if result.failure_code or result.error else ""
            echo(styled(f"run {result.name} {status.value}{extra}", "yellow"),
                 "; Enter resumes it, a save applies the edit, q quits")

    def loop(self, result: RunResult) -> RunResult:
        from cli.prompting import Stop, ask, interactive
        from iterion.store import RunStatus

        while not self.quit and not self.token.cancelled:  # (Ctrl-C cancelled it: stop)
            if self.pending_save:
                self.pending_save = False
                result = self.apply_save(result)
                continue
            self.show(result)
            try:
                event = self.watch.wait()
            except KeyboardInterrupt:
                echo()
                break
            if event.kind == "save":
                self.pending_save = True
                continue
            if event.text == "q":
                break
            if result.status is RunStatus.PAUSED_WAITING_HUMAN and result.pending and interactive(False):
                try:
                    answers = ask(result.pending)
                except Stop:
                    continue
                result = self.resume(answers)
            elif result.status in (RunStatus.PAUSED_OPERATOR, RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED):
                result = self.resume()
        return result


def _print_detected(d: Any) -> None:
    from cli.rewind import print_detected  # the one printer of `rewind --auto`'s diff

    print_detected(d)


def _attach(store: Store, run_ref: str, file: Path) -> RunResult:
    """A parked run of ``file`` as a RunResult (refused: another workflow's run, or running)."""
    from iterion.engine.result import RunResult
    from iterion.store import RunStatus

    run_id = store.resolve_run(run_ref)
    doc = store.load_run(run_id)
    recorded = Path(doc.bundle_path or doc.file_path or "")
    if recorded.resolve() != file.resolve():
        raise CliError(f"run {doc.name} is a run of {recorded}, not of {file}",
                       hint=f"iterion dev {recorded} --run-id {doc.name}")
    if doc.status is RunStatus.RUNNING:
        raise CliError(f"run {doc.name} is running in another process: dev attaches only to a parked run",
                       hint=f"iterion pause --run-id {doc.name}, then attach again")
    cp = store.load_checkpoint(run_id)
    p = cp.pending_interaction if cp is not None else None
    pending = {"node": p.node, "kind": p.kind, **p.questions} if p is not None else None
    return RunResult(run_id=run_id, name=doc.name, status=doc.status, failure_code=doc.failure_code,
                     error=doc.error, pending=pending if doc.status is RunStatus.PAUSED_WAITING_HUMAN else None)


def dev_cmd(
    file: Path = typer.Argument(..., help="The workflow: a .bot file or a bundle directory."),
    workspace: Path | None = typer.Option(None, "--workspace", help="Where the run executes in place (default: the current directory)."),
    run_id: str | None = typer.Option(None, "--run-id", help="Attach to this parked run of FILE instead of starting one. Example: --run-id 01a2b3"),
    var: list[str] = typer.Option([], "--var", help="Set a workflow var: --var name=value (repeatable)."),
    preset: str | None = typer.Option(None, "--preset", help="A named preset of var values."),
    backend: str | None = typer.Option(None, "--backend", help="Use this backend for every LLM node. Example: --backend script"),
    model: str | None = typer.Option(None, "--model", help="Use this model for every LLM call."),
    script: Path | None = typer.Option(None, "--script", help="Answers file of the script backend (default: <file>.script.yaml beside the workflow)."),
    confirm: bool = typer.Option(False, "--confirm", help="Ask before each rewind and resume (files a person edited are always asked about). Example: --confirm"),
    debounce: float = typer.Option(DEBOUNCE_S, "--debounce", min=0.0, help="Seconds the files must stay quiet before a save is applied (editors write several times)."),
    store_dir: Path | None = STORE_DIR,
) -> None:
    from cli.flags import key_values
    from cli.preflight import (
        check_backends_usable,
        check_launch,
        check_model,
        check_run_writable,
        check_script,
    )
    from cli.storeopts import open_swept
    from iterion.engine.launch import launch_run
    from iterion.engine.resume import ResumeOptions
    from iterion.engine.source import InvalidWorkflow, compile_source
    from iterion.invocation import command
    from iterion.requests import LaunchRequest, human_nodes
    from iterion.store import RunStatus
    from iterion.store.ids import new_id

    if run_id is not None and (var or preset or workspace is not None or model):
        raise CliError("--run-id attaches to an existing run: --var, --preset, --workspace and --model are its own",
                       hint="drop them, or start a new run without --run-id")
    check_script(script)
    if run_id is None:
        check_launch(workspace, backend, script)
    store = open_swept(store_dir, skip=run_id, write=True)
    options = ResumeOptions(file=file, force=True, backend=backend,
                            script_file=str(script.resolve()) if script else None, on_wait=echo_err)
    first: Callable[[], RunResult] | None = None  # the launch, for a new run
    if run_id is not None:
        check_run_writable(store, run_id)
        attached = _attach(store, run_id, file)
        session = Session(store, file, attached.run_id, options, confirm=confirm, debounce_s=debounce)
        echo(f"attached to run {attached.name} ({attached.run_id}): {attached.status.value}")
        session.pending_save = True  # the source may have changed since it parked: apply it first
    else:
        try:
            compiled = compile_source(file)
        except InvalidWorkflow as exc:
            for d in exc.diagnostics:
                echo(d.format())
            raise
        check_backends_usable(compiled.workflow, file, backend, script)
        request = LaunchRequest.build(
            file=str(file), workspace=str(workspace) if workspace is not None else None,
            vars=dict(key_values(var, "--var")), preset=preset, backend=backend, model=check_model(model),
            script=str(script.resolve()) if script else None)
        new = new_id()
        launch = request.launch_options(human_nodes(compiled), workspace=workspace, on_wait=echo_err, run_id=new)
        session = Session(store, file, new, options, confirm=confirm, debounce_s=debounce)
        echo(styled(f"watching {len(session.watch.files)} file(s) of {file}; q + Enter quits", "dim"))
        start = session  # (for the closure below: the session that owns the new run)
        first = lambda: launch_run(  # noqa: E731
            store, file, launch, token=start.token, listener=start.listener, compiled=compiled)
    try:
        session.loop(session.execute(first) if first is not None else attached)
    except KeyboardInterrupt:  # a second Ctrl-C: execute() has moved the run out of `running`
        echo_err("\ninterrupted")
    doc = store.load_run(session.run_id)
    echo()
    echo(f"run {doc.name} ({doc.id}): {doc.status.value}")
    if doc.status not in (RunStatus.FINISHED, RunStatus.FAILED):
        echo(f"  continue with: {command('dev', str(file), '--run-id', doc.name)}")
    if doc.status is RunStatus.CANCELLED:
        raise typer.Exit(int(ExitCode.CANCELLED))


def register(app: typer.Typer) -> None:
    app.command("dev", help=HELP, short_help="Run a workflow, watch its files, rewind and resume on each save.")(dev_cmd)
