"""The run timeline (``runs/<run>/events.jsonl``): event names, an appender and a tolerant reader.

Append-only, one JSON object per line: ``{seq, time, type, node, iteration, payload}``. Each
append is flushed and fsynced before it returns. A writer killed mid-line leaves a torn last
line: readers ignore it and the next append truncates it away (it never reached a reader, so
nothing is lost that was ever observed). ``seq`` continues across processes: an appender reads
the last complete line before its first write, and again whenever the file changed under it.

The timeline is for people and audits; the checkpoint, not this file, is the execution state.
"""

from __future__ import annotations

import fcntl
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from iterion.store.errors import CorruptDocumentError
from iterion.store.timeutil import utcnow

EVENTS_FILE = "events.jsonl"

# -- the vocabulary ------------------------------------------------------------------------------
RUN_STARTED = "run_started"
RUN_RESUMED = "run_resumed"
RUN_PAUSED = "run_paused"
RUN_FINISHED = "run_finished"
RUN_FAILED = "run_failed"
RUN_CANCELLED = "run_cancelled"
RUN_REWOUND = "run_rewound"
RUN_ORPHAN_PROMOTED = "run_orphan_promoted"
RUN_TAKEN_OVER = "run_taken_over"  # a process took over a run whose process died (engine/takeover.py)
RUN_RETRY_SCHEDULED = "run_retry_scheduled"
RUN_RETRY_SKIPPED = "run_retry_skipped"
RUN_WORKSPACE_RESET = "run_workspace_reset"
RUN_WORKSPACE_BANK_RESTORED = "run_workspace_bank_restored"
RUN_WORKSPACE_CHECKPOINT = "run_workspace_checkpoint"
NODE_STARTED = "node_started"
NODE_FINISHED = "node_finished"
NODE_FAILED = "node_failed"
NODE_RETRIED = "node_retried"
# the recovery dispatcher's decisions (engine/recovery.py): an in-run retry, a recovery pause for
# a person, or "let the failure stand" (the run then parks failed_resumable as before)
NODE_RETRY_SCHEDULED = "node_retry_scheduled"
RECOVERY_PAUSED = "recovery_paused"
RECOVERY_DECLINED = "recovery_declined"
BOUNDARY_WRITTEN = "boundary_written"
# a boundary's capture left paths out (over the size limit, unreadable, special files):
# {label, skipped: [{path, reason}], raw_paths}; only paths newly skipped since the last boundary
WORKSPACE_CAPTURE_SKIPPED = "workspace_capture_skipped"
CHECKPOINT_WRITTEN = "checkpoint_written"
CHECKPOINT_LOST = "checkpoint_lost"
ARTIFACT_PUBLISHED = "artifact_published"
HUMAN_INPUT_REQUESTED = "human_input_requested"
HUMAN_INPUT_RECEIVED = "human_input_received"
ASK_USER_REQUESTED = "ask_user_requested"
RECOVERY_PAUSE_REQUESTED = "recovery_pause_requested"
ATTACHMENT_STAGED = "attachment_staged"
BRANCH_STARTED = "branch_started"
BRANCH_FINISHED = "branch_finished"
BRANCH_FAILED = "branch_failed"
EDGE_SELECTED = "edge_selected"
LOOP_ITERATION = "loop_iteration"
BACKEND_CALL = "backend_call"
# a tool's shell exited leaving background children in its process group: {pids, count, action,
# grace_s, killed} (engine/procgroup.py)
TOOL_CHILDREN_LEFT = "tool_children_left"
BUDGET_EXCEEDED = "budget_exceeded"
SOURCE_CHANGE_ACCEPTED = "source_change_accepted"
WARNING = "warning"

EVENT_TYPES: frozenset[str] = frozenset(
    v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str) and k != "EVENTS_FILE"
)


class Event(BaseModel):
    model_config = ConfigDict(extra="ignore")

    seq: int
    time: datetime
    type: str
    node: str | None = None
    iteration: int | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


def events_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVENTS_FILE


def _split_complete(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines of ``data`` and the byte length they cover (a torn tail is excluded)."""
    end = data.rfind(b"\n") + 1
    return [ln for ln in data[:end].split(b"\n") if ln.strip()], end


def _parse(line: bytes, path: Path, lineno: int) -> Event:
    try:
        return Event.model_validate_json(line)
    except ValueError as exc:
        raise CorruptDocumentError(f"{path}:{lineno}: not a valid event line ({exc.__class__.__name__})") from None


def read_events(run_dir: Path, *, after_seq: int = 0) -> list[Event]:
    """Every complete event (seq > ``after_seq``), in order. A torn last line is ignored."""
    path = events_path(run_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines, _ = _split_complete(data)
    out = [_parse(ln, path, i + 1) for i, ln in enumerate(lines)]
    return [e for e in out if e.seq > after_seq]


def last_flush_time(run_dir: Path) -> float | None:
    """POSIX time of the last flush to events.jsonl (its mtime), or None with no events yet.

    The 60-second staleness rule for --force-stale compares against this.
    """
    try:
        return events_path(run_dir).stat().st_mtime
    except FileNotFoundError:
        return None


class EventLog:
    """Appender for one run's events.jsonl. Thread-safe; safe against other processes too
    (each append holds an exclusive flock on the file for the read-tail + write)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = events_path(run_dir)
        self._lock = threading.Lock()
        self._seq = 0
        self._size = -1  # file size after our last write; -1 = must read the tail

    def append(self, type: str, *, node: str | None = None, iteration: int | None = None,
               payload: dict[str, Any] | None = None) -> Event:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                size = os.fstat(fd).st_size
                if size != self._size:
                    self._seq, size = self._resync(fd, size)
                event = Event(seq=self._seq + 1, time=utcnow(), type=type, node=node,
                              iteration=iteration, payload=payload or {})
                line = event.model_dump_json().encode("utf-8") + b"\n"
                os.lseek(fd, size, os.SEEK_SET)
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
                self._seq, self._size = event.seq, size + len(line)
                return event
            finally:
                os.close(fd)  # closing releases the flock

    def _resync(self, fd: int, size: int) -> tuple[int, int]:
        """Read the last seq from the file's tail; truncate a torn tail a killed writer left.

        Reads backwards in growing chunks so a long timeline costs one small read. -> (seq, size)
        """
        chunk = 64 * 1024
        while True:
            start = max(0, size - chunk)
            data = os.pread(fd, size - start, start)
            end = data.rfind(b"\n") + 1  # bytes of data up to and including the last newline
            if end == 0 and start > 0:
                chunk *= 4
                continue
            complete = start + end
            prev = data.rfind(b"\n", 0, end - 1) + 1 if end else 0
            if prev == 0 and start > 0 and end:
                chunk *= 4  # the last complete line starts before this chunk
                continue
            last = data[prev:end].strip()
            break
        if complete != size:
            os.ftruncate(fd, complete)
            os.fsync(fd)
        seq = _parse(last, self.path, 0).seq if last else 0
        return seq, complete
