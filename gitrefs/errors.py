"""The gitrefs error family: every failure a person can act on derives from GitRefsError.

GitRefsError is a gitrefs.persist.UserError, so the CLI prints any of these as one ``error:`` line
(plus a ``hint:``) instead of a traceback.
"""

from __future__ import annotations

from gitrefs.persist import UserError


class GitRefsError(UserError):
    """A user-facing gitrefs failure: ``message`` is one line, ``hint`` says what to do."""


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
