"""The tracker's user-facing failures: one base class the CLI prints as a single line."""

from __future__ import annotations

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind


class TrackError(UserError):
    """A refusal or bad input the operator can act on (never a bug)."""


class StoreLayoutError(TrackError):
    """The store directory is unusable (inside the workspace, or not a directory)."""


class UnknownSnapshotError(TrackError):
    """A snapshot id or label that this run never recorded."""


class CorruptStoreError(TrackError):
    """An object or document whose content does not match its name."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, exit_code=ErrorKind.REFUSED)
