"""The per-run execution lock: exclusive across processes, released when the holder is SIGKILLed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from iterion.store import LockHeldError, RunDoc, RunLock, Store, is_held, read_owner

from .helpers import spawn, wait_for

_HOLDER = """
import sys, time
from pathlib import Path
from iterion.store import RunLock
lock = RunLock(Path(sys.argv[1]))
if not lock.try_acquire():
    print("busy"); sys.exit(4)
Path(sys.argv[2]).touch()
time.sleep(600)
"""

_TRY = """
import sys
from pathlib import Path
from iterion.store import RunLock
print("got" if RunLock(Path(sys.argv[1])).try_acquire() else "busy")
"""


def _try_other_process(run_dir: Path) -> str:
    proc = spawn(_TRY, str(run_dir))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out.strip()


def test_in_process_acquire_release(store: Store, run: RunDoc) -> None:
    lock = store.lock(run.id)
    assert not store.is_locked(run.id)
    assert lock.try_acquire()
    assert store.is_locked(run.id)
    owner = read_owner(store.run_dir(run.id))
    assert owner is not None and owner["pid"] == os.getpid()
    assert not store.lock(run.id).try_acquire()  # a second description in this process is refused too
    with pytest.raises(LockHeldError, match=f"pid {os.getpid()}"):
        store.lock(run.id).acquire()
    lock.release()
    assert not store.is_locked(run.id)
    with store.lock(run.id):
        assert store.is_locked(run.id)
    assert not store.is_locked(run.id)


def test_exclusive_across_processes_and_released_on_sigkill(store: Store, run: RunDoc, tmp_path: Path) -> None:
    run_dir = store.run_dir(run.id)
    ready = tmp_path / "held"
    holder = spawn(_HOLDER, str(run_dir), str(ready))
    try:
        wait_for(ready)
        assert is_held(run_dir)
        assert _try_other_process(run_dir) == "busy"
        assert not RunLock(run_dir).try_acquire()
        owner = read_owner(run_dir)
        assert owner is not None and owner["pid"] == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert not is_held(run_dir)  # the kernel dropped the flock with the process
    assert _try_other_process(run_dir) == "got"
    mine = RunLock(run_dir)
    assert mine.try_acquire()
    mine.release()


def test_force_stale_guard(store: Store, run: RunDoc, tmp_path: Path) -> None:
    from iterion.store import StatusRefusedError
    from iterion.store import events as ev

    store.check_stale(run.id)  # never flushed, not locked: provably ownerless
    store.events(run.id).append(ev.RUN_STARTED)
    flushed = store.last_flush_time(run.id)
    assert flushed is not None
    with pytest.raises(StatusRefusedError, match="less than 60s"):
        store.check_stale(run.id, now=flushed + 5)
    store.check_stale(run.id, now=flushed + 61)
    ready = tmp_path / "held"
    holder = spawn(_HOLDER, str(store.run_dir(run.id)), str(ready))
    try:
        wait_for(ready)
        with pytest.raises(StatusRefusedError, match=f"pid {holder.pid}"):
            store.check_stale(run.id, now=flushed + 3600)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    store.check_stale(run.id, now=flushed + 3600)
    with store.lock(run.id) as mine:  # the resuming process itself holds the lock
        store.check_stale(run.id, now=flushed + 3600, own_lock=mine)
        with pytest.raises(StatusRefusedError, match="live owner"):
            store.check_stale(run.id, now=flushed + 3600)
