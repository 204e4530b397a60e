"""What a sandbox refuses with: a configuration this engine cannot honour, a driver that is not
installed, a sandbox that would not start. Each is a one-line ``UserError`` naming the fix."""

from __future__ import annotations

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind
from iterion.failure_codes import FailureCode

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or run with --sandbox none"


class SandboxError(UserError):
    """Base of the sandbox's refusals."""

    default_kind = ErrorKind.REFUSED


class SandboxConfigError(SandboxError):
    """The workflow's ``sandbox:`` asks for something this engine does not run (a container image,
    per-host network rules, ...)."""


class SandboxUnavailable(SandboxError):
    """The driver's program is missing here (``bwrap`` not on PATH)."""

    # the code a surface records when this refusal ends a run that exists (a queued delivery)
    failure_code = FailureCode.SANDBOX_SETUP_FAILED.value


class SandboxSetupError(SandboxError):
    """The driver is installed but a sandbox could not be started (namespaces refused, a bind
    source missing, ...): the run never executes a command without it."""

    failure_code = FailureCode.SANDBOX_SETUP_FAILED.value
