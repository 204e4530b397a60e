"""TEST-ONLY fault injection: SIGKILL this process at a named point.

``ITERION_TEST_KILL_AT=<site>:<n>`` makes the n-th call of ``kill_point(<site>)`` (counted
from 1 in this process) send SIGKILL to the calling process itself: no handler runs, no
``finally`` block, no buffered write is flushed, exactly like an external ``kill -9`` landing
there. The fault tests (tests/faults/) use it to stop a rewind between any two of its file
operations. Unset (always, outside those tests) a kill point is one dictionary lookup.

The variable is read here and nowhere else. Sites in use:

* ``track-state-append``: after each half of a line appended to a tracker's ``state.log``
  (the first kill leaves a torn line: workspacetrack/store.py);
* ``restore``: after each file write or removal of a restore (workspacetrack and git);
* ``rewind-intent``, ``rewind-files``, ``rewind-checkpoint``, ``rewind-parked``, ``rewind-event``:
  after each durable step of ``iterion rewind`` (see iterion/rewind/intent.py);
* ``run-index``: after a run.json write, before its run index row (iterion/store/fsdocs.py);
* ``gc``: after each run ``iterion gc`` collects and each object it deletes (iterion/store/gc.py);
* ``subbot-child-stopped``: after a subbot's child run stopped, before the parent acts on it
  (iterion/engine/nodes/subbot.py).
"""

from __future__ import annotations

import os
import signal

KILL_ENV = "ITERION_TEST_KILL_AT"

_counts: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(KILL_ENV)
    if not spec or ":" not in spec:
        return None
    site, _, n = spec.rpartition(":")
    try:
        return site, int(n)
    except ValueError:
        return None


def kill_point(site: str) -> None:
    """Count one passage through ``site``; SIGKILL this process if it is the configured one."""
    target = _target()
    if target is None or target[0] != site:
        return
    _counts[site] = _counts.get(site, 0) + 1
    if _counts[site] == target[1]:
        os.kill(os.getpid(), signal.SIGKILL)
