"""The one shape of a user-facing failure, shared by every layer.

Bad input or a refusal the user can act on (never a bug): ``message`` is one line, ``hint``
says what would work, ``exit_code`` is what the CLI exits with. The CLI prints any
``UserError`` as ``error:``/``hint:`` lines instead of a traceback, so a layer only has to
derive its errors from it.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """What a ``UserError.exit_code`` says: the kind of failure, the one vocabulary of the layers
    below the CLI. The HTTP API returns it as is (``exit_code`` of an error body; 422 for bad
    input, 409 for a refusal); the CLI turns it into its exit status with
    ``cli.exit_codes.cli_exit_code`` (REFUSED exits 2 there: 1 means a run failed)."""

    REFUSED = 1    # a refused operation (a finished run, a changed source, a held lock)
    BAD_INPUT = 2  # bad input or usage (an unknown run or node, a malformed value)
    INTERNAL = 3   # not a UserError at all: a bug (the HTTP API and the server's worker say so)


class UserError(Exception):
    default_exit_code: int = ErrorCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = self.default_exit_code if exit_code is None else exit_code
