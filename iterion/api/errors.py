"""The exceptions of iterion's Python API: one hierarchy over the engine's refusals.

Every layer raises its user-facing problems as ``gitrefs.persist.UserError`` subclasses (store, engine,
rewind, sandbox); the API re-raises each as one of these, so a caller catches ``IterionError``
(or a narrower class) without knowing which layer refused. The original is ``__cause__``.
A run that stops (parked, failed, cancelled) is not an exception: it is a ``Run`` whose
``status`` says so; ``Run.raise_for_status()`` turns a failure into ``RunFailedError`` on request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitrefs.persist.errors import ErrorKind, UserError

if TYPE_CHECKING:
    from iterion.api.types import Run


class IterionError(UserError):
    """Base of every API error: ``message`` (one line) and ``hint`` (the fix, or None).
    A ``UserError`` like the layers' own, so the CLI reports one as it reports theirs
    (``kind``: the original's; ``exit_code=``, its older spelling, still accepted)."""

    def __init__(self, message: str, hint: str | None = None, *, kind: ErrorKind | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message, hint=hint, kind=kind, exit_code=exit_code)


class RefusedError(IterionError):
    """The operation was refused before it changed anything (bad input, wrong run status)."""


class InvalidWorkflowError(RefusedError):
    """The workflow does not compile; ``diagnostics`` lists each problem (one line each),
    ``diagnostic_details`` the same as ``iterion validate --json`` gives them; ``path``: the source."""

    def __init__(self, message: str, hint: str | None = None, *, kind: ErrorKind | None = None,
                 exit_code: int | None = None, diagnostics: tuple[str, ...] = (),
                 diagnostic_details: tuple[Mapping[str, Any], ...] = (), path: str | None = None) -> None:
        super().__init__(message, hint, kind=kind, exit_code=exit_code)
        self.diagnostics = diagnostics
        self.diagnostic_details = diagnostic_details
        self.path = path


class RunNotFoundError(RefusedError):
    """No run matches the id, prefix or name (or a prefix matches several)."""


class SourceChangedError(RefusedError):
    """The workflow changed since the run executed it: resume with ``force=True`` to accept it."""


class RunBusyError(RefusedError):
    """Another process holds the run or its workspace (a live engine, a resume, a rewind)."""


class RewindRefusedError(RefusedError):
    """The rewind was refused (unknown node, nothing to detect, a run that moved on)."""


class AutoRewindRefusedError(RewindRefusedError):
    """``rewind(auto=True)`` cannot name the node to replay from (the edit affects no node, the
    source cannot be compared, the affected node never ran); ``hint`` says what works instead
    (often a ``resume(force=True)``); ``candidates``: the nodes it considered."""

    def __init__(self, message: str, hint: str | None = None, *, kind: ErrorKind | None = None,
                 exit_code: int | None = None, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint, kind=kind, exit_code=exit_code)
        self.candidates = candidates


class EnvironmentProblemError(IterionError):
    """The machine refused (a full or read-only disk, a permission): fix it and retry."""


class StoreProblemError(EnvironmentProblemError):
    """The run store cannot be used as it is (a corrupt document, full, unreachable)."""


class RunFailedError(IterionError):
    """Raised by ``Run.raise_for_status()`` for a run that failed or was cancelled; ``run`` is it."""

    def __init__(self, run: Run) -> None:
        detail = f"{run.failure_code}: {run.error}" if run.failure_code or run.error else run.status.value
        super().__init__(f"run {run.id} ({run.name}) {run.status.value}: {detail}")
        self.run = run


def translate(exc: BaseException) -> IterionError | None:
    """The API error for ``exc`` (a layer's refusal or an environment problem), else None (a bug:
    the caller lets it propagate unchanged)."""
    from gitrefs.persist.oserror import environment_error
    from iterion.engine.errors import InvalidWorkflow, SourceChanged
    from iterion.rewind.errors import AutoRefusedError, RewindError
    from iterion.store.errors import (
        CorruptDocumentError,
        LockHeldError,
        StoreFullError,
        StoreUnavailableError,
    )
    from iterion.store.errors import (
        RunNotFoundError as StoreRunNotFound,
    )
    from iterion.store.workspace_lock import WorkspaceBusy

    env = environment_error(exc)
    if env is not None:
        return EnvironmentProblemError(str(env.message), env.hint, kind=env.kind)
    if not isinstance(exc, UserError):
        return None
    message, hint = str(exc.message or exc), exc.hint
    cls: type[IterionError]
    extra: dict[str, Any] = {}
    if isinstance(exc, InvalidWorkflow):
        cls = InvalidWorkflowError
        extra["diagnostics"] = tuple(d.format() for d in exc.diagnostics)
        extra["diagnostic_details"] = tuple(d.to_json() for d in exc.diagnostics)
        extra["path"] = exc.path
    elif isinstance(exc, SourceChanged):
        cls = SourceChangedError
    elif isinstance(exc, StoreRunNotFound):
        cls = RunNotFoundError
    elif isinstance(exc, (LockHeldError, WorkspaceBusy)):
        cls = RunBusyError
    elif isinstance(exc, AutoRefusedError):
        cls = AutoRewindRefusedError
        extra["candidates"] = tuple(exc.candidates)
    elif isinstance(exc, RewindError):
        cls = RewindRefusedError
    elif isinstance(exc, (CorruptDocumentError, StoreFullError, StoreUnavailableError)):
        cls = StoreProblemError
    else:
        cls = RefusedError
    return cls(message, hint, kind=exc.kind, **extra)
