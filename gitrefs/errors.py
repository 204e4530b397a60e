"""The gitrefs error family: every failure a person can act on derives from GitRefsError.

The CLI registers GitRefsError as a user error, so any of these surfaces as one ``error:`` line
(plus a ``hint:``) instead of a traceback.
"""

from __future__ import annotations


class GitRefsError(Exception):
    """A user-facing gitrefs failure: ``message`` is one line, ``hint`` says what to do."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotARepository(GitRefsError):
    pass


class BareRepository(GitRefsError):
    pass


class UnknownRun(GitRefsError):
    pass


class RunAlreadyStarted(GitRefsError):
    pass


class UnknownBoundary(GitRefsError):
    pass


class UnknownRevision(GitRefsError):
    pass


class MissingRemote(GitRefsError):
    pass


class PushFailed(GitRefsError):
    pass


class GitCommandFailed(GitRefsError):
    pass


class RefLayoutError(GitRefsError, ValueError):
    """A ref name that is not one of iterion's run refs."""
