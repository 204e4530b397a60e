"""Running commands in a sandbox: tool nodes' commands and scripts, the claw agent's ``bash``,
agent CLI backends (docs/technical/sandbox.md).

``config`` reads ``sandbox:`` and ``--sandbox``; ``driver`` is the seam (``Driver``, ``Plan``,
``NoSandbox``); ``bubblewrap`` the host driver; ``run`` one run's sandboxes and ``wrap``, the
entry point every call site uses.
"""

from iterion.sandbox.config import NodeSandbox, check_flag, resolve
from iterion.sandbox.driver import Driver, NoSandbox, Plan
from iterion.sandbox.errors import (
    INSTALL_HINT,
    SandboxConfigError,
    SandboxError,
    SandboxSetupError,
    SandboxUnavailable,
)
from iterion.sandbox.run import Role, RunSandbox, unsandboxed

__all__ = ["INSTALL_HINT", "Driver", "NoSandbox", "NodeSandbox", "Plan", "Role", "RunSandbox", "SandboxConfigError",
           "SandboxError", "SandboxSetupError", "SandboxUnavailable", "check_flag", "resolve", "unsandboxed"]
