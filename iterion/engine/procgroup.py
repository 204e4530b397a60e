"""What a tool's shell left behind in its process group when it exited, and ending it.

A tool runs in its own process group (``toolproc``). The node ends when the shell ends; a
background child (`sleep 20 & echo started`) is still in the group then. Such children are
listed here and, by the default policy, given a short grace to exit on their own and then
terminated with the whole group: SIGTERM, and SIGKILL for whatever is left a moment later.

Policy: ``$ITERION_TOOL_CHILD_GRACE_S`` (read by the iterion process, not the tool) is the
grace in seconds (default 2; 0 = terminate at once), or ``keep`` to leave the children
running (they are still reported). Two seconds lets a child that is about to finish (a
flush, a last write) do so without making every node that forgot a `&` wait for long.

A child that left the group (``setsid``, a daemon's double fork) is not seen: it is no longer
the tool's to end, as with any process supervisor that works by process group.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gitrefs.persist.envsettings import EnvSettingError, env_seconds
from iterion.engine.errors import GraceSettingError

GRACE_ENV = "ITERION_TOOL_CHILD_GRACE_S"
DEFAULT_GRACE_S = 2.0
KEEP = "keep"
# after SIGTERM at the end of the grace, how long before SIGKILL; then how long to wait for it
_TERM_WAIT_S = 1.0
_KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class ChildrenLeft:
    """The children a tool's shell left in its process group when it exited."""

    pids: list[int]
    grace_s: float | None          # None: the `keep` policy (left running)
    killed: list[int] = field(default_factory=list)  # still alive at the end of the grace

    def payload(self) -> dict[str, object]:
        return {"pids": self.pids, "count": len(self.pids),
                "action": "kept" if self.grace_s is None else ("killed" if self.killed else "exited"),
                "grace_s": self.grace_s, "killed": self.killed}


def child_grace_s(environ: Mapping[str, str] | None = None) -> float | None:
    """The grace in seconds, or None for ``keep``; raises GraceSettingError on a bad value."""
    env = os.environ if environ is None else environ
    if env.get(GRACE_ENV, "").strip().lower() == KEEP:
        return None
    try:
        return env_seconds(GRACE_ENV, DEFAULT_GRACE_S, alternative=repr(KEEP), environ=env)
    except EnvSettingError as exc:
        raise GraceSettingError(exc.name, exc.raw, exc.expected, exc.example) from None


def stat_fields(pid: int | str) -> tuple[str, int, int] | None:
    """(state, process group, start ticks) of /proc/PID, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2:].split()  # the command name may hold spaces and parens
    try:
        return rest[0].decode("ascii", "replace"), int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, start ticks) of the live (not zombie) processes of group ``pgid``, from /proc."""
    found: list[tuple[int, int]] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat_fields(entry)
            if fields is not None and fields[1] == pgid and fields[0] != "Z":
                found.append((int(entry), fields[2]))
    return sorted(found)


def group_pids(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``, sorted.

    Read from /proc; without it, ``[pgid]`` stands for "the group still has members"."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    return [pid for pid, _ in group_members(pgid)]


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_empty(pgid: int, seconds: float, poll: float, tick: Callable[[], None] | None) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if not group_pids(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        if tick is not None:
            tick()
        time.sleep(poll)


def end_group(pgid: int, grace_s: float, *, poll: float = 0.05, term: bool = True) -> bool:
    """SIGTERM the group (``term``: not when it was sent already), give it ``grace_s`` to exit,
    then SIGKILL it and wait for it to be gone (True when it is). ``grace_s`` 0: SIGKILL at once."""
    if grace_s > 0:
        if term:
            _signal_group(pgid, signal.SIGTERM)
        if _wait_empty(pgid, grace_s, poll, None):
            return True
    _signal_group(pgid, signal.SIGKILL)
    return _wait_empty(pgid, _KILL_WAIT_S, poll, None)


def settle_group(pgid: int, grace_s: float | None, *, poll: float = 0.05,
                 tick: Callable[[], None] | None = None) -> ChildrenLeft | None:
    """After the group's leader exited: None if the group is empty; else wait up to ``grace_s``
    for it to empty, then SIGTERM it, then SIGKILL it. ``tick`` runs while waiting (a cancel or
    the run's duration cap may raise from it; the caller then kills the group)."""
    pids = group_pids(pgid)
    if not pids:
        return None
    if grace_s is None:
        return ChildrenLeft(pids, None)
    if _wait_empty(pgid, grace_s, poll, tick):
        return ChildrenLeft(pids, grace_s)
    alive = group_pids(pgid)
    _signal_group(pgid, signal.SIGTERM)
    if not _wait_empty(pgid, _TERM_WAIT_S, poll, None):
        _signal_group(pgid, signal.SIGKILL)
        _wait_empty(pgid, _KILL_WAIT_S, poll, None)
    return ChildrenLeft(pids, grace_s, killed=alive)
