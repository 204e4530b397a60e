"""The one shape of a user-facing failure, shared by every layer.

Bad input or a refusal the user can act on (never a bug): ``message`` is one line, ``hint``
says what would work, ``kind`` says which kind of failure it is (the CLI chooses its exit status
from it). The CLI prints any ``UserError`` as ``error:``/``hint:`` lines instead of a traceback,
so a layer only has to derive its errors from it.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorKind(IntEnum):
    """The kind of a user-facing failure: the one vocabulary of the layers below the CLI, which
    never choose an exit status. The value is a wire format: the HTTP API sends it as the
    ``exit_code`` of an error body (422 for bad input, 409 for a refusal) and the server's worker
    in its answer. The CLI alone chooses its exit status from the kind
    (``cli.exit_codes.EXIT_FOR_KIND``: REFUSED and BAD_INPUT exit 2, since 1 means a run failed)."""

    REFUSED = 1    # a refused operation (a finished run, a changed source, a held lock)
    BAD_INPUT = 2  # bad input or usage (an unknown run or node, a malformed value)
    INTERNAL = 3   # not a UserError at all: a bug (the HTTP API and the server's worker say so)


# The older name of ErrorKind (the same enum), kept so its many call sites can move to the new
# name without one commit touching every layer at once.
ErrorCode = ErrorKind


class UserError(Exception):
    """``kind``: an ErrorKind, always (a CLI exit status is never stored here: the CLI maps the
    kind, or, for its own ``cli.errors.CliError``, keeps the status it chose beside it)."""

    default_kind: ErrorKind = ErrorKind.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None, kind: ErrorKind | None = None,
                 exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        chosen = kind if kind is not None else exit_code  # exit_code=: the older spelling of kind=
        # ErrorKind(...) refuses anything that is not a kind (an exit status given by mistake)
        self.kind: ErrorKind = self.default_kind if chosen is None else ErrorKind(chosen)

    @property
    def exit_code(self) -> int:
        """The kind's wire value (the HTTP API's ``exit_code`` field); not the CLI's exit status."""
        return int(self.kind)
