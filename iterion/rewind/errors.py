"""The rewind's user-facing refusals: one line (``message``), an optional ``hint``, an exit code."""

from __future__ import annotations

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind


class RewindError(UserError):
    """A rewind the user asked for and iterion refused, with why and what would work."""

    default_kind = ErrorKind.REFUSED


class UnknownNodeError(RewindError):
    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=ErrorKind.BAD_INPUT)


class AutoRefusedError(RewindError):
    """``--auto`` cannot name one pivot; ``candidates`` are the nodes it would have considered."""

    def __init__(self, message: str, *, hint: str | None = None, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint=hint)
        self.candidates = candidates
