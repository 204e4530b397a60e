"""The rewind's user-facing refusals: one line (``message``), an optional ``hint``, an exit code."""

from __future__ import annotations

from persist import UserError

# Same meaning as cli.errors (this layer must not import the CLI): 1 = a refused operation,
# 2 = bad input (unknown node or run).
EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2


class RewindError(UserError):
    """A rewind the user asked for and iterion refused, with why and what would work."""

    default_exit_code = EXIT_REFUSED


class UnknownNodeError(RewindError):
    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=EXIT_BAD_INPUT)


class AutoRefusedError(RewindError):
    """``--auto`` cannot name one pivot; ``candidates`` are the nodes it would have considered."""

    def __init__(self, message: str, *, hint: str | None = None, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint=hint)
        self.candidates = candidates
