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
the node is never killed. At a human gate the fields are asked at once at the terminal
(cli/prompting.py), as `iterion run` asks them, while the watch goes on beside the questions: a
save withdraws the question (one line says so), is applied as any save, and if the run parks at
a gate again its fields are asked again. ``q`` (at a question too, or Ctrl-C/Ctrl-D there) quits
and leaves the run parked and resumable; Ctrl-C while a node runs cancels the run (resumable), a
second Ctrl-C stops at once and the run is moved to ``cancelled``, never left ``running``. A dev
session only ever rewinds the one run it started or attached to.

Runs are driven only through ``iterion.api`` (run, resume, rewind, pause, cancel), the one path
from a command to the engine that `run`, `resume`, `rewind` and `inspect` take too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cli.dev_watch import DEBOUNCE_S, Watch, answer_reader
from cli.errors import CliError
from cli.exit_codes import ExitCode
from cli.output import echo, echo_err, styled
from cli.storeopts import STORE_DIR
from gitrefs.persist import UserError

if TYPE_CHECKING:
    from iterion.api import Run
    from iterion.store import Store

HELP = """Start (or attach to) a run of FILE, watch FILE and what it imports/includes, and on each
save validate, rewind to the node the edit affects (`rewind --auto`) and resume with --force.

\b
At a human gate its fields are asked at once; a save while a question is open withdraws it,
applies the edit, and the fields are asked again if the run parks at a gate again.
Keys (type, then Enter): q quits, at a question too (or Ctrl-C/Ctrl-D there), leaving the run
parked and resumable; Enter resumes a run parked otherwise (failed, paused, cancelled).
Ctrl-C while a node runs cancels the run (resumable); twice stops at once.

\b
Examples:
  iterion dev review.bot --var topic=rivers
  iterion dev review.bot --confirm            # ask before each rewind
  iterion dev review.bot --run-id RUN         # attach to a parked run of review.bot
"""


class Session:
    """One dev session: the run it owns, and how it executes, rewinds and resumes it."""

    def __init__(self, store: Store, file: Path, run_id: str, *, backend: str | None = None,
                 script: Path | None = None, confirm: bool, debounce_s: float) -> None:
        from cli.progress import Progress
        from iterion.engine.cancel import CancelToken

        self.store, self.file, self.run_id = store, file, run_id
        self.backend, self.script = backend, script
        self.confirm = confirm
        self.token = CancelToken()
        self.listener = Progress()
        self.watch = Watch(file, debounce_s=debounce_s)
        self.pending_save = False
        self.quit = False

    # -- executing, with the watch running beside it ----------------------------------------------
    def _pause(self, why: str) -> None:
        from iterion import api

        try:
            api.pause(self.run_id, wait=0, reason=why, store=self.store)
        except Exception:  # noqa: BLE001 - not running any more: the main loop sees the save/quit itself
            return
        echo_err(styled(f"  {why}: pausing at the next node boundary", "dim"))

    def execute(self, call: Callable[[], Run]) -> Run:
        """Run ``call`` (a launch or resume) while saves and ``q`` are watched for; a save or a
        ``q`` asks the run to pause at its next node boundary."""
        from iterion import api

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
            api.withdraw_request(self.run_id, store=self.store)  # a pause the run ended before seeing

    def _never_running(self) -> None:
        """After an abrupt stop, the run is not left ``running`` (its lock was released as the
        stack unwound: the cancel moves the status directly)."""
        from iterion import api
        from iterion.store import RunStatus

        try:
            if self.store.load_run(self.run_id).status is RunStatus.RUNNING:
                api.cancel(self.run_id, wait=0, reason="iterion dev: interrupted twice", store=self.store)
        except Exception as exc:  # noqa: BLE001 - reported; the run is then promoted by the next sweep
            echo_err(f"warning: could not record the cancel of run {self.run_id}: {exc}")

    def resume(self, answers: dict[str, Any] | None = None) -> Run:
        from iterion import api

        return self.execute(lambda: api.resume(
            self.run_id, answers=answers or {}, force=True, store=self.store, file=self.file, backend=self.backend,
            script=self.script, token=self.token, on_event=self.listener, engine_options={"on_wait": echo_err}))

    # -- a save ------------------------------------------------------------------------------------
    def apply_save(self, result: Run) -> Run:
        from cli.prompting import Stop, interactive, yes_no
        from cli.rewind import print_files, print_result
        from cli.validate import check
        from iterion import api
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
            dry = api.rewind(self.run_id, auto=True, file=self.file, dry_run=True, store=self.store,
                             on_detected=_print_detected)
        except api.AutoRewindRefusedError as exc:
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
        report = dict(dry.detail)
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
        r = dict(api.rewind(self.run_id, auto=True, file=self.file, store=self.store).detail)
        echo(f"rewound to {r['to_node']}; dropped outputs: {', '.join(r.get('dropped_nodes') or [])}")
        print_files(r["files"], False)
        echo(styled("resuming with --force", "dim"))
        return self.resume()

    # -- the loop ----------------------------------------------------------------------------------
    def show(self, result: Run) -> None:
        from iterion.store import RunStatus

        status = result.status
        echo()
        if status is RunStatus.PAUSED_WAITING_HUMAN and result.pending:
            p = result.pending
            for key in ("instructions", "question"):
                if p.get(key):
                    echo(styled("?", "yellow"), f" {p['node']} asks: {str(p[key]).strip()}")
            # (on a terminal the fields are asked at once: ask_gate; here there is none to ask at)
            echo(styled("waiting at the gate (no terminal to ask it at): a save applies the edit, q quits", "bold"))
        elif status is RunStatus.FINISHED:
            echo(styled(f"run {result.name} finished; ", "green"), "q quits")
        else:
            extra = f" ({result.failure_code}: {result.error})" if result.failure_code or result.error else ""
            echo(styled(f"run {result.name} {status.value}{extra}", "yellow"),
                 "; Enter resumes it, a save applies the edit, q quits")

    def ask_gate(self, pending: dict[str, Any]) -> dict[str, Any] | None:
        """The gate's answers asked at once, the watch running beside the questions; None: a save
        withdrew the question (``pending_save`` set) or the person quit (``quit`` set)."""
        from cli.prompting import Interrupted, Stop, ask, reading_with

        changed, stop = threading.Event(), threading.Event()

        def monitor() -> None:
            if self.watch.wait(stop, lines=False).kind == "save":  # stdin is the questions'
                changed.set()

        thread = threading.Thread(target=monitor, name="iterion-dev-gate-watch", daemon=True)
        thread.start()
        try:
            with reading_with(answer_reader(changed)):
                return ask(pending, hint="(a save withdraws the question and applies the edit; "
                                         "q quits, the run stays parked)")
        except Interrupted:
            echo()
            echo(styled("the workflow changed: the question is withdrawn; applying the save", "yellow"))
            self.pending_save = True
        except Stop:
            self.quit = True
        finally:
            stop.set()
            thread.join()
        return None

    def loop(self, result: Run) -> Run:
        from cli.prompting import interactive
        from iterion.store import RunStatus

        while not self.quit and not self.token.cancelled:  # (Ctrl-C cancelled it: stop)
            if self.pending_save:
                self.pending_save = False
                result = self.apply_save(result)
                continue
            if result.status is RunStatus.PAUSED_WAITING_HUMAN and result.pending and interactive(False):
                answers = self.ask_gate(dict(result.pending))
                if answers is not None:
                    result = self.resume(answers)
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
            if result.status in (RunStatus.PAUSED_OPERATOR, RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED):
                result = self.resume()
        return result


def _print_detected(d: Any) -> None:
    from cli.rewind import print_detected  # the one printer of `rewind --auto`'s diff

    print_detected(d)


def _attach(store: Store, run_ref: str, file: Path) -> Run:
    """A parked run of ``file`` (refused: another workflow's run, or running)."""
    from iterion import api
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
    return api.inspect(run_id, store=store)


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
    from iterion import api
    from iterion.engine.source import InvalidWorkflow, compile_source
    from iterion.invocation import command
    from iterion.requests import LaunchRequest
    from iterion.store import RunStatus
    from iterion.store.ids import new_id

    if run_id is not None and (var or preset or workspace is not None or model):
        raise CliError("--run-id attaches to an existing run: --var, --preset, --workspace and --model are its own",
                       hint="drop them, or start a new run without --run-id")
    check_script(script)
    if run_id is None:
        check_launch(workspace, backend, script)
    store = open_swept(store_dir, skip=run_id, write=True)
    first: Callable[[], Run] | None = None  # the launch, for a new run
    if run_id is not None:
        check_run_writable(store, run_id)
        attached = _attach(store, run_id, file)
        session = Session(store, file, attached.id, backend=backend, script=script, confirm=confirm,
                          debounce_s=debounce)
        echo(f"attached to run {attached.name} ({attached.id}): {attached.status.value}")
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
        new = new_id()  # known before the launch returns: a save or a q pauses it meanwhile
        session = Session(store, file, new, backend=backend, script=script, confirm=confirm, debounce_s=debounce)
        echo(styled(f"watching {len(session.watch.files)} file(s) of {file}; q + Enter quits", "dim"))
        start = session  # (for the closure below: the session that owns the new run)
        first = lambda: api.run(  # noqa: E731
            request=request, store=store, compiled=compiled, token=start.token, on_event=start.listener,
            run_id=new, engine_options={"on_wait": echo_err})
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
