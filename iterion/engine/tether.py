"""Tie a child process to the iterion process that starts it: when iterion dies, by any signal
(SIGKILL and the OOM killer included), the child's whole process group dies within moments.

Every process a run starts (a tool's shell or script, an agent CLI, an MCP stdio server, the
claw agent's shell commands) is started through ``tethered(argv)``, which prefixes ``argv`` with
this file run as a script by the same interpreter (``python -I -S tether.py PARENT -- argv...``).
That small launcher (docs/technical/processes.md):

1. makes itself the leader of a new session when it is not one already, so the group it
   kills is never iterion's own (callers start it with ``start_new_session`` anyway);
2. watches its parent, the iterion process, through a pidfd (``pidfd_open``; a 0.1 s poll of
   ``getppid`` where the kernel has none). The parent is a PROCESS, so it does not matter
   which of iterion's threads started the child (``PR_SET_PDEATHSIG`` alone fires when the
   forking THREAD exits, and a fan-out branch or a backend call thread exits long before the run);
3. forks ``argv`` into its own group, with ``PR_SET_PDEATHSIG(SIGKILL)`` tied to the launcher
   (single-threaded, so that tie is exact): a launcher killed by itself takes its child along;
4. when the parent dies, SIGKILLs its whole process group (the child, every grandchild still in
   the group, itself); when the child exits, exits the same way (the same status, or the same
   signal), so the caller's ``Popen`` sees what it would have seen without the launcher;
5. ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT: every stopper (a cancel, a tool's settle, an
   agent CLI's grace, the MCP SDK's terminate) signals the whole GROUP, so the command gets the
   signal once and decides; were the launcher to die of it, its tie would SIGKILL the command
   before its grace.

Limits: a grandchild that left the group (``setsid``, a daemon's double fork) is not killed;
the run's own record of its groups (``iterion.engine.children``) covers a group whose launcher
is gone. This file imports nothing of iterion: it runs in the child with ``-I -S`` (no site,
no environment), which keeps its start-up near 10 ms.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys

_IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.1  # only without pidfd
# the shell's conventions (this file imports nothing of iterion, so not cli.exit_codes): what a
# process killed by SIGKILL, and a command that cannot be started, exit with
_KILLED = 128 + int(signal.SIGKILL)
_CANNOT_START = 127


def tethered(argv: list[str], *, path: str | None = None) -> list[str]:
    """``argv`` run under the launcher, tied to this process. Raises FileNotFoundError when
    ``argv[0]`` cannot be found (on ``path``, else $PATH), as ``Popen`` would have."""
    if not argv:
        raise ValueError("no command to run")
    relative = os.sep in argv[0] and not os.path.isabs(argv[0])  # resolved in the child's cwd: its word
    if not relative and shutil.which(argv[0], path=path) is None:
        raise FileNotFoundError(2, "No such file or directory", argv[0])
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), "--", *argv]


def _die_with_parent() -> None:
    import ctypes  # in the forked child only: the launcher's own start-up stays small

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _start(argv: list[str]) -> int:
    me = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        _die_with_parent()
        if os.getppid() != me:  # the launcher died before the tie was made
            os._exit(_KILLED)
        # what Popen(restore_signals=True) gives a child; this interpreter ignores them again
        for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot start {argv[0]}: {exc.strerror or exc}\n".encode(errors="replace"))
    os._exit(_CANNOT_START)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _kill_group() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)  # the child, its group, and this launcher
    os._exit(_KILLED)  # not reached


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        os.write(2, b"usage: tether.py PARENT_PID -- COMMAND [ARG...]\n")
        os._exit(os.EX_USAGE)
    parent, argv = int(args[0]), args[2:]
    if os.getpgrp() != os.getpid():
        os.setsid()
    parent_fd = _pidfd(parent)
    if os.getppid() != parent:  # the parent died before it could be watched: start nothing
        os._exit(_KILLED)
    child = _start(argv)
    for fd in (0, 1):  # the child holds the pipes; the launcher keeps stderr for its own words
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, fd)
        os.close(devnull)
    for sig in _IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    child_fd = _pidfd(child)
    while True:
        if parent_fd is not None and child_fd is not None:
            ready, _, _ = select.select([parent_fd, child_fd], [], [])
            if parent_fd in ready:
                _kill_group()
            if child_fd in ready:
                break
        else:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                _exit_like(status)
            if os.getppid() != parent:
                _kill_group()
            select.select([], [], [], _POLL_S)
    _, status = os.waitpid(child, 0)
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
