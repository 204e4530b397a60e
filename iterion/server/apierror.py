"""The HTTP refusal: an error's status, one-line message and hint, and the CLI's exit code.

Below the service and its executors (iterion/server/local.py, queued.py), so neither imports the other.
"""

from __future__ import annotations

from typing import Any

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.oserror import environment_error
from iterion.store.errors import (
    CorruptDocumentError,
    InvalidTransitionError,
    LockHeldError,
    RunNotFoundError,
    StaleWriteError,
    StatusRefusedError,
    StoreUnavailableError,
)
from iterion.store.readers import ItemNotFoundError


class ApiError(Exception):
    """An HTTP refusal: ``status`` the HTTP code, ``message``/``hint`` one line each."""

    def __init__(self, status: int, message: str, *, hint: str | None = None, exit_code: int = ErrorKind.BAD_INPUT,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.hint, self.exit_code = status, message, hint, exit_code
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "hint": self.hint, "exit_code": self.exit_code, **self.extra}


def _one_line(text: str | None) -> str | None:
    return None if text is None else text.replace("\r", "\\r").replace("\n", "\\n")


def from_user_error(exc: BaseException) -> ApiError:
    """The HTTP shape of an engine/store refusal (the same message the CLI prints)."""
    env = environment_error(exc)
    if env is not None:  # the server's disk or permissions, not the request: 503, the CLI's line
        return ApiError(503, _one_line(env.message) or "", hint=_one_line(env.hint), exit_code=env.exit_code)
    if not isinstance(exc, UserError):
        return ApiError(500, f"internal error: {type(exc).__name__}: {_one_line(str(exc))}", exit_code=ErrorKind.INTERNAL,
                        hint="see the server's log; re-run with ITERION_DEBUG=1 for the traceback")
    message, hint = _one_line(exc.message or str(exc)) or "", _one_line(exc.hint)
    if isinstance(exc, StoreUnavailableError):  # the shared store did not answer: try again later
        return ApiError(503, message, hint=hint, exit_code=exc.exit_code)
    if isinstance(exc, (RunNotFoundError, ItemNotFoundError)):
        return ApiError(404, message, hint=hint, exit_code=exc.exit_code)
    if isinstance(exc, StaleWriteError):
        return ApiError(409, message, hint="reload the run and retry", exit_code=exc.exit_code,
                        extra={"reason": "stale_version"})
    if isinstance(exc, (LockHeldError, StatusRefusedError, InvalidTransitionError, CorruptDocumentError)):
        return ApiError(409, message, hint=hint, exit_code=exc.exit_code)
    # exit code 2 = bad input (422); 1 = a refusal after reading the run (409)
    return ApiError(422 if exc.exit_code == ErrorKind.BAD_INPUT else 409, message, hint=hint, exit_code=exc.exit_code)


def bad_input(message: str, hint: str | None = None) -> ApiError:
    return ApiError(422, message, hint=hint, exit_code=ErrorKind.BAD_INPUT)
