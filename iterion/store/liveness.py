"""Is the process a run recorded as its owner provably gone? (the immediate-takeover rule)

A ``running`` run whose execution lock (the flock) is free has no live owner on THIS host's
kernel, but the flock alone is not the whole proof: a launch writes its run document before it
takes the lock, and a flock on a shared filesystem says nothing about another machine. So a run
may be taken over at once only when, in addition, its recorded owner is provably dead here:

* the owner was recorded on this host (same hostname), in this boot and in this pid namespace
  (``proc_start`` carries ``<boot id>/<pid namespace>/<start ticks>``), and
* its pid no longer exists, is a zombie (it exited; a zombie holds no file, so no flock), or now
  belongs to another process (its start time differs: the pid was reused).

Everything else is ``unknown`` (another host, another boot or namespace, a record without a
start time whose pid exists, no /proc) and keeps the 60-second staleness guard. The verdict is
only ever "dead" on positive evidence; a wrong "dead" would let two processes execute one run.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

PROC = Path("/proc")


class Liveness(StrEnum):
    DEAD = "dead"
    ALIVE = "alive"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Verdict:
    liveness: Liveness
    reason: str  # one clause for messages, e.g. "pid 123 no longer exists"

    @property
    def dead(self) -> bool:
        return self.liveness is Liveness.DEAD


def this_host() -> str:
    return socket.gethostname()


def _boot_id() -> str | None:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _pid_namespace() -> str | None:
    try:
        return os.readlink(PROC / "self/ns/pid")
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start ticks) of ``pid`` from /proc/<pid>/stat, or None when there is no such entry."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the LAST ')'
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], fields[19]  # field 3 (state) and field 22 (starttime)


def process_start(pid: int | None = None) -> str | None:
    """``<boot id>/<pid namespace>/<start ticks>`` of ``pid`` (default: this process), or None
    where the platform has no /proc. Never cached: a forked child must record its own."""
    boot, ns = _boot_id(), _pid_namespace()
    if boot is None or ns is None:
        return None
    try:
        stat = _stat(os.getpid() if pid is None else pid)
    except (OSError, ValueError, IndexError):
        return None
    return None if stat is None else f"{boot}/{ns}/{stat[1]}"


def owner_liveness(pid: int, host: str, proc_start: str | None) -> Verdict:
    """The verdict on a recorded owner (see the module doc for what proves death)."""
    here = this_host()
    if host != here:
        return Verdict(Liveness.UNKNOWN, f"its owner ran on host {host}, not on this host ({here})")
    if pid == os.getpid():
        return Verdict(Liveness.ALIVE, f"its owner is this very process (pid {pid})")
    if proc_start is not None:
        boot, _, rest = proc_start.partition("/")
        ns, _, ticks = rest.rpartition("/")
        if boot != _boot_id():
            return Verdict(Liveness.UNKNOWN, f"its owner (pid {pid}) was recorded in another boot of host {host}")
        if ns != _pid_namespace():
            return Verdict(Liveness.UNKNOWN, f"its owner (pid {pid}) ran in another pid namespace (a container?)")
    if not (PROC / "self/stat").exists():
        return _by_signal(pid)
    try:
        stat = _stat(pid)
    except (OSError, ValueError, IndexError):
        return Verdict(Liveness.UNKNOWN, f"the state of pid {pid} cannot be read")
    if stat is None:
        return Verdict(Liveness.DEAD, f"its owner (pid {pid} on {host}) no longer exists")
    state, start = stat
    if state in ("Z", "X", "x"):
        return Verdict(Liveness.DEAD, f"its owner (pid {pid} on {host}) has exited")
    if proc_start is None:
        return Verdict(Liveness.UNKNOWN, f"pid {pid} exists and the record has no start time to tell it "
                                         "from a reused pid")
    if start != ticks:
        return Verdict(Liveness.DEAD, f"its owner (pid {pid} on {host}) is gone (the pid now belongs to "
                                      "another process)")
    return Verdict(Liveness.ALIVE, f"its owner (pid {pid} on {host}) is alive")


def _by_signal(pid: int) -> Verdict:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return Verdict(Liveness.DEAD, f"its owner (pid {pid}) no longer exists")
    except OSError:
        pass
    return Verdict(Liveness.UNKNOWN, f"pid {pid} exists and cannot be told from a reused pid here")
