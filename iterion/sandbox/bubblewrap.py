"""The bubblewrap driver (Debian package ``bubblewrap``, program ``bwrap``).

What a wrapped process gets: the host filesystem read-only (``--ro-bind / /``), a minimal
``/dev``, its own ``/proc`` (``/proc/sys`` read-only), a private ``/tmp``, the plan's binds, no
network unless the plan keeps the host's, and its own PID, IPC and UTS namespaces.
``--die-with-parent`` ends it when the process that started it dies, and the PID namespace takes
every process inside with its first one. Run as root, every capability is dropped: root without
capabilities cannot remount the read-only host writable.

No ``--new-session``: iterion starts every wrapped process in a session of its own already
(``start_new_session``), without a controlling terminal to inject into; keeping bwrap and its
command in one process group lets a cancel signal them together.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from iterion.sandbox.driver import Plan

PROGRAM = "bwrap"
_TRIAL_TIMEOUT_S = 20.0


class BubblewrapDriver:
    name = "bubblewrap"

    def __init__(self, program: str | None = None) -> None:
        self.program = program or PROGRAM

    def executable(self) -> str | None:
        return shutil.which(self.program)

    def unavailable(self) -> str | None:
        if self.executable() is None:
            return f"bubblewrap (`{self.program}`) is not installed (not found on PATH)"
        return None

    def trial(self, plan: Plan) -> str | None:
        why = self.unavailable()
        if why is not None:
            return why
        argv = self.wrap(["true"], plan)
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=_TRIAL_TIMEOUT_S, start_new_session=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap did not start: {exc}"
        if p.returncode != 0:
            return f"bubblewrap could not start a sandbox: {(p.stderr.strip() or f'exit {p.returncode}')[:300]}"
        return None

    def wrap(self, argv: list[str], plan: Plan) -> list[str]:
        exe = self.executable() or self.program
        out = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
               "--tmpfs", "/tmp"]
        for op in plan.ordered():
            p = str(op.path)
            if op.kind == "tmpfs":
                out += ["--tmpfs", p]
            elif op.kind == "remount-ro":
                out += ["--remount-ro", p]
            else:
                out += [f"--{op.kind}", p, p]
        out += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"]
        if not plan.network:
            out.append("--unshare-net")
        if os.geteuid() == 0:
            out += ["--cap-drop", "ALL"]
        out += ["--setenv", "TMPDIR", "/tmp"]
        for k, v in plan.env:
            out += ["--setenv", k, v]
        out += ["--chdir", str(plan.workspace), "--", *argv]
        return out

    def setup_failed(self, exit_code: int, stderr: str) -> str | None:
        # bwrap reports its own set-up errors as "bwrap: ..." and exits 1 before the command runs
        first = stderr.lstrip().splitlines()[0] if stderr.strip() else ""
        if exit_code == 1 and first.startswith("bwrap: "):
            return first
        return None
