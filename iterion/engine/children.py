"""The run's live process groups: recorded in the run document while they live, ended by a takeover.

Every process a run starts runs under the launcher (``iterion.engine.tether``), which ends its
group when iterion dies. That is the first barrier. The second is this ledger: each group the
run's ``CancelToken`` registers is written to ``RunDoc.children`` (process group id, and the
leader's start time as ``<boot id>/<pid namespace>/<start ticks>``) and removed when the group is
settled. A takeover (``iterion.engine.takeover.record_takeover``: ``resume`` of an orphan,
``--force-stale``, the orphan sweep, ``iterion cancel`` of an ownerless run, the queue runner's
resume) first ends every listed group still alive, and only then writes the ``takeover:``
boundary: the interval attributed to the person starts after the run's last process ended.

Verification (a reused pid is never hit):

* the record was made on this host, in this boot and pid namespace; otherwise nothing is done
  (the group is reported as unverifiable);
* the group's leader (pid = pgid) is alive with the recorded start ticks: it is the run's group,
  SIGKILLed whole;
* a process with that pid but other start ticks: the pid was reused, which the kernel allows
  only once every member of the old group is gone; nothing is done;
* no leader (it exited, members remain, e.g. a tool's background child during the settle
  grace): the members whose own start ticks are not earlier than the leader's recorded ones are
  killed one by one. A process with an earlier start cannot belong to the group; one with a
  later start can, in one case only, belong to a stranger: every member of ours ended, the pid
  counter came round to this very number, and the new holder made a group and left it. The
  launcher makes a leaderless group rare (only a group left behind while its tool's shell had
  already exited), and the kernel's pid space (``pid_max``, 4 million on 64-bit) makes the
  coincidence remote; docs/technical/processes.md lists it as a limit.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from iterion.engine.cancel import CancelToken
from iterion.engine.procgroup import end_group, group_members, stat_fields
from iterion.store.liveness import process_start, this_host
from iterion.store.run_doc import ChildGroup

if TYPE_CHECKING:
    from iterion.store import RunDoc, Store

_KILL_WAIT_S = 5.0


class RunChildren:
    """The ``GroupLedger`` of one run: records in ``run.json`` (compare-and-swap updates)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._lock = threading.Lock()  # fan-out branches record at once: one update at a time

    def opened(self, pgid: int, what: str) -> object:
        record = ChildGroup(pgid=pgid, proc_start=process_start(pgid), host=this_host(), what=what[:200])
        with self._lock:
            self.store.update_run(self.run_id, lambda d: d.children.append(record))
        return record

    def closed(self, key: object) -> None:
        assert isinstance(key, ChildGroup)

        def drop(d: RunDoc) -> None:
            d.children = [c for c in d.children if (c.pgid, c.proc_start) != (key.pgid, key.proc_start)]

        with self._lock:
            self.store.update_run(self.run_id, drop)


def _ticks(proc_start: str | None) -> tuple[str, str, int] | None:
    if not proc_start:
        return None
    boot, _, rest = proc_start.partition("/")
    ns, _, ticks = rest.rpartition("/")
    try:
        return boot, ns, int(ticks)
    except ValueError:
        return None


def _here() -> tuple[str, str] | None:
    mine = _ticks(process_start())
    return None if mine is None else (mine[0], mine[1])


def end_child(record: ChildGroup) -> dict[str, Any]:
    """End what is left of one recorded group, verified as above; what was done, for the timeline."""
    out: dict[str, Any] = {"pgid": record.pgid, "what": record.what}
    recorded = _ticks(record.proc_start)
    here = _here()
    if record.host != this_host() or recorded is None or here is None or recorded[:2] != here:
        return {**out, "action": "unverifiable"}
    leader = stat_fields(record.pgid)
    if leader is not None and leader[0] != "Z" and leader[2] != recorded[2]:
        return {**out, "action": "reused"}  # the pid belongs to another process: ours are all gone
    if leader is not None and leader[0] != "Z" and leader[1] == record.pgid:
        pids = [pid for pid, _ in group_members(record.pgid)]
        gone = end_group(record.pgid, 0)
        return {**out, "action": "killed", "pids": pids, "gone": gone}
    members = [pid for pid, start in group_members(record.pgid) if start >= recorded[2]]
    if not members:
        return {**out, "action": "gone"}
    for pid in members:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + _KILL_WAIT_S
    while any(_alive(p) for p in members) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {**out, "action": "killed", "pids": members, "gone": not any(_alive(p) for p in members)}


def _alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def end_recorded_children(store: Store, doc: RunDoc) -> list[dict[str, Any]]:
    """Before a takeover's boundary: end every recorded group still alive, then clear the
    records. Returns what was done per group (empty when none was recorded)."""
    if not doc.children:
        return []
    done = [end_child(c) for c in doc.children]
    ended = {(c.pgid, c.proc_start) for c in doc.children}

    def drop(d: RunDoc) -> None:
        d.children = [c for c in d.children if (c.pgid, c.proc_start) not in ended]

    store.update_run(doc.id, drop)
    return done


@dataclass
class CallProcesses:
    """The process groups one backend call starts (an agent CLI): registered with the run's token
    (a cancel SIGTERMs them; recorded in the ledger) and ended by ``stop`` when the engine
    abandons the call (a cancel, SIGTERM/SIGINT, the run's duration cap): SIGTERM, the group's
    grace, SIGKILL, and waiting for it to be gone, so the run's stop is recorded after it."""

    token: CancelToken
    _stop: threading.Event = field(default_factory=threading.Event)
    _groups: dict[int, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set() or self.token.cancelled

    @contextmanager
    def group(self, pgid: int, *, grace_s: float, what: str) -> Iterator[None]:
        with self.token.process_group(pgid, what=what, graceful=grace_s > 0):
            with self._lock:
                self._groups[pgid] = grace_s
            try:
                yield
            finally:
                with self._lock:
                    self._groups.pop(pgid, None)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            groups = list(self._groups.items())
        for pgid, grace in groups:
            # a cancelled token SIGTERMed the group already (CancelToken.cancel): one request only
            end_group(pgid, grace, term=not self.token.cancelled)
