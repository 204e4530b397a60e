"""The one shape of a user-facing DSL error raised (not reported as a diagnostic): a message
and an optional hint, which the CLI prints as ``error:`` and ``hint:`` lines."""

from __future__ import annotations

from gitrefs.persist import UserError


class HintedError(UserError, ValueError):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
