"""The tracker's user-facing failures: one base class the CLI prints as a single line."""

from __future__ import annotations


class TrackError(Exception):
    """A refusal or bad input the operator can act on (never a bug)."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code


class StoreLayoutError(TrackError):
    """The store directory is unusable (inside the workspace, or not a directory)."""


class UnknownSnapshotError(TrackError):
    """A snapshot id or label that this run never recorded."""


class CorruptStoreError(TrackError):
    """An object or document whose content does not match its name."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=1)
