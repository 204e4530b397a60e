"""The workspace lock: one run executes in an in-place workspace at a time.

``<store>/workspaces/<sha256 of the workspace's real path>.lock`` is flocked (exclusive) by the
process executing an in-place run there, for as long as it executes: a run parked at a gate,
paused, failed or finished holds nothing. While held, the file records the holder (run id, pid, host,
workspace, since) for the message a second ``run``/``resume`` prints while it waits, or the
error it refuses with under ``--no-wait``.

Like the per-run lock it is an ``fcntl.flock``: the kernel drops it when the holder dies
(SIGKILL included), so a crashed run never leaves a workspace locked, and the file is never
deleted (unlinking a flocked file would let a second process lock a fresh inode). Worktree runs
never take it: each has its own worktree.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitrefs.persist.errors import ErrorKind
from iterion.store.errors import StoreError
from iterion.store.timeutil import utcnow

WORKSPACES_DIR = "workspaces"
POLL_S = 0.2


def workspace_key(workspace: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:32]


def workspace_lock_path(store_root: Path, workspace: Path) -> Path:
    return Path(store_root) / WORKSPACES_DIR / f"{workspace_key(workspace)}.lock"


def read_holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(holder: dict[str, Any], workspace: Path) -> str:
    run = holder.get("run_id") or "?"
    host = holder.get("host")
    where = f"pid {holder.get('pid')}" + (f" on {host}" if host and host != socket.gethostname() else "")
    return f"run {run} ({where}) which is executing in {holder.get('workspace') or workspace}"


class WorkspaceBusy(StoreError):
    """``--no-wait`` and another run executes in the workspace (exit 2)."""

    def __init__(self, holder: dict[str, Any], workspace: Path, refusal: str | None = None) -> None:
        super().__init__(f"workspace {workspace} is busy: {describe_holder(holder, workspace)}; "
                         + (refusal or "--no-wait refuses instead of waiting (drop it to wait for that run "
                                       "to park or finish)"),
                         exit_code=ErrorKind.BAD_INPUT)
        self.holder = holder


def _ancestors() -> set[int]:
    """Pids of this process's ancestors (Linux /proc; empty where it cannot be read)."""
    out: set[int] = set()
    pid = os.getppid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


class NestedRunError(StoreError):
    """A run started from inside a node of the run that holds the workspace: it would wait forever."""


class WorkspaceLock:
    """Held by the process executing an in-place run, from before its first write to its park."""

    def __init__(self, store_root: Path, workspace: Path, run_id: str) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.path = workspace_lock_path(store_root, self.workspace)
        self.run_id = run_id
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        record = {"run_id": self.run_id, "pid": os.getpid(), "host": socket.gethostname(),
                  "workspace": str(self.workspace), "since": utcnow().isoformat()}
        data = json.dumps(record).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        self._fd = fd
        return True

    def acquire(self, *, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                refusal: str | None = None) -> None:
        """Take the lock; while another run holds it, wait (telling ``on_wait`` who, once per
        holder) or, with ``wait=False``, raise WorkspaceBusy naming the holder (and ``refusal``:
        what to do instead)."""
        told: tuple[Any, ...] | None = None
        while not self.try_acquire():
            holder = read_holder(self.path)
            if not wait:
                raise WorkspaceBusy(holder, self.workspace, refusal)
            if holder.get("host") == socket.gethostname() and holder.get("pid") in _ancestors():
                raise NestedRunError(
                    f"workspace {self.workspace} is held by {describe_holder(holder, self.workspace)}, "
                    "which started this process: waiting would never end; run the nested workflow with "
                    "--workspace elsewhere or as a worktree run", exit_code=ErrorKind.BAD_INPUT)
            key = (holder.get("run_id"), holder.get("pid"))
            if on_wait is not None and key != told:
                told = key
                on_wait(f"waiting for {describe_holder(holder, self.workspace)}; --no-wait to refuse instead")
            time.sleep(POLL_S)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # a free lock records no holder: a command that took it and gave it back (a launch
            # refused on a full disk) leaves the store byte-for-byte as it found it
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.release()
