"""The engine's exceptions, all of them, and where each one ends.

Two kinds. A user-facing refusal derives from ``gitrefs.persist.UserError`` (one line, a hint, a
``kind`` from ``gitrefs.persist.errors.ErrorKind``; the CLI prints it as ``error:``/``hint:`` and
exits with ``cli.exit_codes.EXIT_FOR_KIND[kind]``). Every other exception is internal: a signal
between two parts of the engine, always caught and translated before a person sees it. The
tree, with the place each internal one is translated::

    gitrefs.persist.UserError
    ├── EngineError                 a refusal of launch/resume/fork (bad --var, unknown preset, ...)
    │   ├── InvalidWorkflow         the workflow has validation errors (the CLI prints the diagnostics)
    │   └── SourceChanged           resume: the source's digest moved since launch (--force overrides)
    ├── PreflightError              a command refused before writing anything (engine/preflight.py)
    └── gitrefs.persist.envsettings.EnvSettingError   an ITERION_*_S number in the environment is garbage
        └── GraceSettingError       $ITERION_TOOL_CHILD_GRACE_S is not a number nor `keep`
                                    -> toolproc.run_process: ToolLaunchError (the tool node fails)

    Exception (internal)
    ├── NodeFailure                 a node did not complete; carries a failure code
    │                               -> Runner.run: the recovery dispatcher, then the run's status
    │                                  (failed_resumable + code), never raised to a caller
    ├── Cancelled                   the cancel token fired (SIGINT/SIGTERM, `iterion cancel`)
    │                               -> Runner.run: status `cancelled`
    ├── CheckpointLost              a node's checkpoint could not be written
    │                               -> Runner.run: stop.lost (CHECKPOINT_LOST, or parked on a full disk)
    ├── OperatorPause               `iterion pause` seen at a node boundary
    │                               -> Runner.run: control.park_operator (`paused_operator`)
    ├── ChildPaused                 a subbot's child run was paused by an operator
    │                               -> Runner.run: Runner._child_paused (`paused_operator`)
    ├── RecoveryPause               the recovery dispatcher parks a failed node for a person
    │                               -> Runner.run: recovery.park_recovery (`paused_waiting_human`)
    ├── ToolLaunchError             a tool's command could not be started
    │                               -> nodes/tool.py: NodeFailure TOOL_FAILED_PERMANENT;
    │                                  nodes/llmcall.py: the agent's shell result, exit 127
    ├── ShellTimeout                an agent's shell call ran past its timeout
    │                               -> nodes/llmcall.py: the shell result, timed_out
    └── ValueError
        └── AnswerError             a value does not fit its field's type
                                    -> launch (--var), answers.py, resume: EngineError (BAD_INPUT);
                                       nodes/human.py: NodeFailure SCHEMA_VALIDATION

The internal exceptions of the other packages are listed in ``TRANSLATED`` below with the
place they are translated; ``tests/architecture/test_exceptions.py`` fails when an exception
class of any package neither derives from ``UserError`` nor is listed there (and when an engine
exception lives outside this module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gitrefs.persist import UserError
from gitrefs.persist.envsettings import EnvSettingError
from gitrefs.persist.errors import ErrorKind
from iterion.failure_codes import FailureCode

if TYPE_CHECKING:
    from iterion.engine.recovery import Decision


class EngineError(UserError):
    """A user-facing engine refusal (bad --var, unknown preset, ...): one line, optional hint."""


class InvalidWorkflow(EngineError):
    """The workflow has validation errors: nothing was created, the diagnostics say why."""

    def __init__(self, path: str, diagnostics: list[Any], outcome: str = "no run was created") -> None:
        errors = [d for d in diagnostics if getattr(d.severity, "value", d.severity) == "error"]
        super().__init__(f"{path} has {len(errors)} validation error(s); {outcome}",
                         hint=f"fix them (`iterion validate {path}` lists them)", exit_code=ErrorKind.REFUSED)
        self.path = path
        self.diagnostics = diagnostics


class SourceChanged(EngineError):
    def __init__(self, run_id: str, recorded: str, current: str, path: str) -> None:
        super().__init__(f"run {run_id}: the workflow source changed since launch (recorded digest {recorded[:12]}, "
                         f"{path} now {current[:12]}); refusing to resume",
                         hint="pass --force if the stored outputs, node ids and schemas are still compatible",
                         exit_code=ErrorKind.REFUSED)
        self.recorded, self.current = recorded, current


class PreflightError(UserError):
    """A command refused before changing anything: what it needs is missing or unusable."""


class NodeFailure(Exception):
    """A node's execution did not complete: ``code`` is a failure code (engine or bot-defined)."""

    def __init__(self, code: FailureCode | str, message: str, *, node: str | None = None,
                 details: dict[str, Any] | None = None, origin: str | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = str(code)
        self.message = message
        self.node = node
        self.details = dict(details or {})
        # for the recovery dispatcher: "backend" when an LLM backend call raised it (an
        # ``failure_codes.Origin``), and how long the provider asked us to wait before a retry
        self.origin = origin
        self.retry_after_s = retry_after_s

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Cancelled(Exception):
    """The operator cancelled the run (SIGINT/SIGTERM or an explicit cancel)."""

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason


class CheckpointLost(Exception):
    """A strict checkpoint write failed (``Runner.checkpoint``); ``cause`` says why."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class OperatorPause(Exception):
    """Raised at a node boundary when an operator asked the run to pause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ChildPaused(Exception):
    """Raised out of a subbot node whose child run parked ``paused_operator`` (an operator paused
    the child): the parent parks ``paused_operator`` too, its subbot node interrupted (re-executed
    on resume, which reattaches and resumes the same child)."""

    def __init__(self, node: str, child_run: str) -> None:
        self.node, self.child_run = node, child_run
        self.message = f"subbot {node}: its child run {child_run} was paused; resume this run to continue both"
        super().__init__(self.message)


class RecoveryPause(Exception):
    """Raised out of a node's execution when the dispatcher parks it for a person."""

    def __init__(self, failure: NodeFailure, node: str, iteration: int, decision: Decision) -> None:
        super().__init__(failure.message)
        self.failure, self.node, self.iteration, self.decision = failure, node, iteration, decision


class ToolLaunchError(Exception):
    """The command could not be started at all (interpreter missing, bad cwd)."""


class ShellTimeout(Exception):
    """The agent's bash call ran past its timeout (raised inside run_process's poll)."""


class AnswerError(ValueError):
    """A value (an answer, a --var) that does not fit its field's type."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason  # why the value is refused, when more precise than "not a valid TYPE"


class GraceSettingError(EnvSettingError):
    """``$ITERION_TOOL_CHILD_GRACE_S`` is neither a number of seconds nor ``keep`` (the shape of
    every refused environment number, gitrefs/persist/envsettings.py; a tool node fails with it)."""


# Every internal exception class of the packages (dotted name) -> where it is caught and what
# it becomes. The engine's own are drawn in the tree above.
TRANSLATED: dict[str, str] = {
    "iterion.engine.errors.NodeFailure": "engine/runner.py Runner.run: the run's status and failure code",
    "iterion.engine.errors.Cancelled": "engine/runner.py Runner.run: status cancelled",
    "iterion.engine.errors.CheckpointLost": "engine/runner.py Runner.run: engine/stop.py lost",
    "iterion.engine.errors.OperatorPause": "engine/runner.py Runner.run: control.park_operator",
    "iterion.engine.errors.RecoveryPause": "engine/runner.py Runner.run: recovery.park_recovery",
    "iterion.engine.errors.ChildPaused": "engine/runner.py Runner.run: Runner._child_paused (`paused_operator`)",
    "iterion.engine.errors.ToolLaunchError": "engine/nodes/tool.py: NodeFailure; engine/nodes/llmcall.py: exit 127",
    "iterion.builtins.registry.BuiltinError": "engine/nodes/tool.py _builtin: NodeFailure TOOL_FAILED_PERMANENT",
    "iterion.engine.errors.ShellTimeout": "engine/nodes/llmcall.py: a timed-out shell result",
    "iterion.engine.errors.AnswerError": "engine/launch.py, answers.py, resume.py: EngineError; "
                                         "engine/nodes/human.py: NodeFailure SCHEMA_VALIDATION",
    "iterion.queue.delivery.UndecodableDelivery": "queue/jsqueue.py fetch: Claimed.undecodable; the runner terms it",
    "iterion.queue.lease.LeaseHeld": "runner/loop.py Runner.handle: a NAK after the lease TTL",
    "gitrefs.persist.model.FormatVersionError": "iterion/store/store.py: CorruptDocumentError; "
                                        "iterion/rewind/intent.py: RewindError",
    "gitrefs.produced_scope.PivotNotRecorded": "gitrefs/run_refs.py: UnknownBoundary; "
                                               "workspacetrack/tracker.py: UnknownSnapshotError",
    "workspacetrack.restore._Refused": "workspacetrack/restore.py: a skipped path with its SkipReason",
    "iterion.budget.DailyCapReached": "engine/runner.py Runner.run: Runner._daily_capped (`paused_operator`)",
    "iterion.budget.BudgetExceeded": "engine/runner.py, context.py, nodes/llmcall.py: NodeFailure "
                                     "BUDGET_EXCEEDED; engine/resume_checks.py: EngineError",
    "iterion.durations.DurationError": "cli/run.py, cli/parked.py: CliError; server/service.py: ApiError 422; dsl/values.py: None (C103); store/gc.py: GcError",
    "iterion.datafile.DataFileError": "engine/coerce.py: AnswerError/NodeFailure; dsl/bundle.py: a diagnostic; "
                                      "backends/script.py: BackendError BACKEND_UNAVAILABLE; cli/run.py, cli/remote_cmd.py: CliError",
    "iterion.expr.ExprError": "engine/edges.py: a warning event, the edge skipped; "
                              "engine/nodes/compute.py: NodeFailure EXPRESSION_FAILED; dsl/references.py: a diagnostic",
    "iterion.expr.ExprSyntaxError": "as iterion.expr.ExprError",
    "iterion.expr.ExprEvalError": "as iterion.expr.ExprError",
    "iterion.templates.TemplateSyntaxError": "dsl/compiler.py, dsl/references.py: a diagnostic; "
                                             "engine/edges.py, engine/declared.py: read as no reference",
    "iterion.templates.TemplateRenderError": "engine/context.py, engine/declared.py: NodeFailure TEMPLATE_FAILED",
    "iterion.shellquote.UnquotableValue": "iterion/templates.py: TemplateRenderError",
    "iterion.dsl.lexer._LineError": "dsl/lexer.py: a diagnostic",
    "iterion.dsl.parser._Error": "dsl/parser.py: a diagnostic",
    "iterion.dsl.sources.SourceError": "dsl/loader.py, dsl/sources.py: a diagnostic",
    "iterion.dsl.loader.OutsideProject": "dsl/loader.py: diagnostic L005",
    "iterion.dsl.unparse.Unwritable": "raised to the caller of dsl.unparse (no command calls it)",
    "iterion.backends.base.BackendError": "engine/nodes/llmcall.py: NodeFailure with the backend's code; "
                                          "server/service.py: ApiError 422",
    "iterion.backends.claw.tools.ToolError": "backends/claw/loop.py: the tool call's error result, to the model",
    "iterion.backends.claw.paths.PathRefused": "backends/claw/tools.py: ToolError, the tool call's error result",
    "iterion.server.apierror.ApiError": "server/app.py: the HTTP error response (its status, error, hint, exit_code)",
    "iterion.server.timeline.BoundaryNotFound": "server/service.py: ApiError 404",
}
