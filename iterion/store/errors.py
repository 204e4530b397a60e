"""The run store's exceptions. ``StoreError`` is the user-facing base the CLI prints as one line."""

from __future__ import annotations

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind


class StoreError(UserError):
    """A store failure the user can act on: ``message`` is one line, ``hint`` an optional second."""


class RunNotFoundError(StoreError):
    pass


class AmbiguousRunRefError(RunNotFoundError):
    """A prefix or name that several runs share (the message says how many; type more)."""


class RunExistsError(StoreError):
    pass


class StaleWriteError(StoreError):
    """The run document changed on disk since this writer read it (compare-and-swap refused)."""

    def __init__(self, run_id: str, expected: int, found: int) -> None:
        super().__init__(
            f"run {run_id} was modified concurrently (expected version {expected}, found {found}); "
            "reload the run and retry",
            hint="another process (a resume, rewind or cancel) wrote the run meanwhile",
            exit_code=ErrorKind.REFUSED,
        )
        self.run_id = run_id
        self.expected = expected
        self.found = found


class InvalidTransitionError(StoreError):
    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=ErrorKind.REFUSED)


class StatusRefusedError(StoreError):
    """A command refused because of the run's status (the message names what would work)."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=ErrorKind.REFUSED)


class CorruptDocumentError(StoreError):
    """A stored document cannot be read or parsed. ``detail`` is the reason alone (no path)."""

    def __init__(self, message: str, *, detail: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=ErrorKind.REFUSED)
        self.detail = detail or message


class LockHeldError(StoreError):
    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=ErrorKind.REFUSED)


class StoreFullError(StoreError):
    """The store's disk is full (or read-only): nothing was changed, exit 2."""

    @classmethod
    def from_os_error(cls, exc: OSError, root: object, outcome: str = "nothing was changed") -> StoreFullError:
        where = exc.filename or root
        return cls(f"cannot write the run store at {where}: {exc.strerror or exc}; {outcome}",
                   hint="free space on that disk (or make it writable), then retry")


class StoreUnavailableError(StoreError):
    """The shared run store (JetStream) did not answer: server down, network, timeout (exit 2;
    HTTP 503). Lives here, not beside the client, so catching it never imports the client."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=ErrorKind.BAD_INPUT)
