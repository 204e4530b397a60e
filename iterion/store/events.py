"""The run timeline (``runs/<run>/events.jsonl``): event names, an appender and a tolerant reader.

Append-only, one JSON object per line: ``{seq, time, type, node, iteration, payload}``. Each
append is flushed and fsynced before it returns (a failed write takes its partial line back). A
writer killed mid-line leaves a torn last line: the next reader or appender moves it aside, under
the file's flock, so never the line of an append in progress. ``seq`` continues across processes:
an appender reads the last complete line before its first write, and again whenever the file
changed under it.

Garbage never blocks a command: a complete line that is not an event (anywhere in the file) and
a dead writer's torn tail are MOVED ASIDE, byte for byte, to ``events.jsonl.corrupt-<UTC time>``
with a one-line warning; the timeline keeps every valid line in order. The move happens under
the file's flock (so no live append is torn apart): first the aside file is written durably,
then the cleaned timeline replaces the old one atomically; a crash between the two leaves the
bad bytes in both places, never in neither. An appender that finds the file replaced under its
lock (another process cleaned it) reopens the new one, so no append lands in a dead inode.

The timeline is for people and audits; the checkpoint, not this file, is the execution state.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from gitrefs.persist import atomic_write_bytes
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
# the queue runner (iterion/runner): a claim {delivery, kind, runner, attempt}, a delivery dropped
# without executing {reason, kind, delivery}, and a run parked on the dead-letter stream
RUN_DELIVERY_CLAIMED = "run_delivery_claimed"
RUN_DELIVERY_DROPPED = "run_delivery_dropped"
RUN_DLQ_PARKED = "run_dlq_parked"
# a successful workspace push {ref, commit, remote, time}; a failed one {ref, remote, error, time}
# (iterion/workspace_checkpoint.py reads the hint from them)
RUN_WORKSPACE_CHECKPOINT = "run_workspace_checkpoint"
RUN_WORKSPACE_CHECKPOINT_FAILED = "run_workspace_checkpoint_failed"
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
# the claw agent (iterion/backends/claw): one per tool call {tool, args_digest, tool_use_id,
# duration_ms, result_bytes, error}; one per permission decision {tool, args_digest, tool_use_id,
# decision, rule, source}; MCP servers started/stopped for a node {server, tools | error}
TOOL_CALLED = "tool_called"
PERMISSION_DECIDED = "permission_decided"
MCP_SERVER_STARTED = "mcp_server_started"
MCP_SERVER_STOPPED = "mcp_server_stopped"
# a streamed model answer (iterion/backends/sse.py): {tokens_out, seconds, tokens_per_s[, done]} at
# most once a second while it arrives; {text, chars, tokens_out, code, error} for an answer a
# failure cut (the partial text is kept, capped)
MODEL_PROGRESS = "model_progress"
MODEL_PARTIAL = "model_partial"
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


# -- the payloads readers rely on ----------------------------------------------------------------
# What the CLI, the server (its timeline, metrics, the web page's rows) and the runner read from
# an event's payload, typed. ``total=False``: the timeline is tolerant, an event of an older
# iterion may lack a field, so a reader still uses ``.get``; a writer may add fields a reader
# does not need (a node failure's details). Read one with ``payload(event, NodeFailedPayload)``.
# tests/store/test_event_payloads.py checks them against the golden timeline and real runs.

class RunStartedPayload(TypedDict, total=False):
    run_id: str
    name: str
    workflow: str
    file: str
    digest: str
    workspace: str
    mode: str
    mechanism: str


class RunResumedPayload(TypedDict, total=False):
    run_id: str
    name: str
    workflow: str
    restart_node: str | None
    from_status: str
    resumed_from: str  # the status resumed from, or human_pause / recovery_pause
    forced: bool
    answers: bool
    raised_caps: Any
    taken_over: str | None  # how a run whose process died was taken over (engine/takeover.py)


class RunFinishedPayload(TypedDict, total=False):
    outputs: list[str]  # the nodes whose outputs the run kept
    merge_skipped: str  # why a worktree run did not fast-forward its target branch


class NodeStartedPayload(TypedDict, total=False):
    kind: str
    resumed: bool


class NodeFinishedPayload(TypedDict, total=False):
    kind: str
    output: Any
    tokens: int
    cost_usd: float


class NodeFailedPayload(TypedDict, total=False):
    code: str
    error: str
    fail_node: bool  # a `fail` node of the workflow (a deliberate failure)


class NodeRetryScheduledPayload(TypedDict, total=False):
    code: str
    attempt: int
    max_retries: int
    delay_s: float


class RecoveryPausedPayload(TypedDict, total=False):
    code: str
    error: str


class WarningPayload(TypedDict, total=False):
    message: str
    code: str
    recorded: bool  # False: the engine could not append it (iterion/engine/notice.py)


class BoundaryWrittenPayload(TypedDict, total=False):
    label: str
    state: str
    mechanism: str


class ArtifactPublishedPayload(TypedDict, total=False):
    name: str
    version: int


class BackendCallPayload(TypedDict, total=False):
    backend: str
    model: str
    tokens: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class BudgetExceededPayload(TypedDict, total=False):
    axis: str
    cap: float
    consumed: float


class RunWorkspaceCheckpointPayload(TypedDict, total=False):
    ref: str
    commit: str
    remote: str
    reason: str
    tree: str
    time: str


class RunWorkspaceCheckpointFailedPayload(TypedDict, total=False):
    ref: str | None  # None: the push failed before a ref was chosen
    remote: str
    reason: str
    error: str
    time: str


class RunDeliveryClaimedPayload(TypedDict, total=False):
    delivery: str
    kind: str
    action: str
    runner: str
    host: str
    attempt: int
    max_deliver: int
    repo_url: str | None
    ref: str | None
    base: str | None  # the commit the run's clone started from


class RunDeliveryDroppedPayload(TypedDict, total=False):
    reason: str
    kind: str
    delivery: str
    message: str
    hint: str | None
    failure_code: str
    error: str


class RunRewoundPayload(TypedDict, total=False):
    rewind_id: str
    from_node: str | None
    to_node: str
    to_iteration: int


# the event type each payload belongs to
PAYLOADS: dict[str, type[Mapping[str, Any]]] = {
    RUN_STARTED: RunStartedPayload, RUN_RESUMED: RunResumedPayload, RUN_FINISHED: RunFinishedPayload, NODE_STARTED: NodeStartedPayload,
    NODE_FINISHED: NodeFinishedPayload, NODE_FAILED: NodeFailedPayload, NODE_RETRY_SCHEDULED: NodeRetryScheduledPayload,
    RECOVERY_PAUSED: RecoveryPausedPayload, WARNING: WarningPayload, BOUNDARY_WRITTEN: BoundaryWrittenPayload,
    ARTIFACT_PUBLISHED: ArtifactPublishedPayload, BACKEND_CALL: BackendCallPayload, BUDGET_EXCEEDED: BudgetExceededPayload,
    RUN_WORKSPACE_CHECKPOINT: RunWorkspaceCheckpointPayload, RUN_WORKSPACE_CHECKPOINT_FAILED: RunWorkspaceCheckpointFailedPayload,
    RUN_DELIVERY_CLAIMED: RunDeliveryClaimedPayload, RUN_DELIVERY_DROPPED: RunDeliveryDroppedPayload, RUN_REWOUND: RunRewoundPayload,
}

P = TypeVar("P", bound=Mapping[str, Any])


def payload(event: Event, kind: type[P]) -> P:
    """``event``'s payload read as ``kind`` (one of the TypedDicts above): typed for the reader,
    not checked at run time (the timeline is read tolerantly, see above)."""
    return cast(P, event.payload)


def events_path(run_dir: Path) -> Path:
    return Path(run_dir) / EVENTS_FILE


def _split_complete(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines of ``data`` and the byte length they cover (a torn tail is excluded)."""
    end = data.rfind(b"\n") + 1
    return [ln for ln in data[:end].split(b"\n") if ln.strip()], end


def _try_parse(line: bytes) -> Event | None:
    try:
        return Event.model_validate_json(line)
    except ValueError:
        return None


def warn(message: str) -> None:
    """The store's one-line warnings (stderr): the command goes on."""
    try:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed stderr never stops a command
        pass


@dataclass(frozen=True)
class MovedAside:
    """What ``repair_events`` moved out of the timeline (``aside`` None: it could not be moved)."""

    aside: Path | None
    lines: int
    size: int
    error: str | None = None

    def message(self, path: Path) -> str:
        what = f"{self.lines} unreadable line(s) ({self.size} bytes)"
        if self.aside is None:
            return f"{path}: skipped {what}; could not move them aside: {self.error}"
        return f"{path}: moved {what} aside to {self.aside.name}; the timeline goes on without them"


def _partition(data: bytes) -> tuple[bytes, bytes, int]:
    """(kept, moved, moved line count): invalid complete lines and a torn tail are moved."""
    end = data.rfind(b"\n") + 1
    kept: list[bytes] = []
    moved: list[bytes] = []
    for line in data[:end].split(b"\n")[:-1]:
        if line.strip() and _try_parse(line) is None:
            moved.append(line + b"\n")
        else:
            kept.append(line + b"\n")
    if end < len(data):
        moved.append(data[end:] + b"\n")  # the torn tail: every byte kept, on its own line
    return b"".join(kept), b"".join(moved), len(moved)


def _aside_path(path: Path) -> Path:
    stamp = utcnow().strftime("%Y%m%dT%H%M%S.%fZ")
    candidate = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    return candidate


def _read_fd(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(1 << 20, size - offset), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _truncate_quietly(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def _repair_locked(path: Path, fd: int) -> MovedAside | None:
    """With the flock held on ``fd`` (the current file): move bad lines aside (see module doc).
    Raises OSError when the aside file or the cleaned timeline cannot be written (nothing moved)."""
    kept, moved, count = _partition(_read_fd(fd))
    if not count:
        return None
    aside = _aside_path(path)
    atomic_write_bytes(aside, moved)
    try:
        atomic_write_bytes(path, kept)
    except OSError:
        aside.unlink(missing_ok=True)  # the bad bytes are still in the timeline: keep one copy
        raise
    return MovedAside(aside, count, len(moved))


def repair_events(run_dir: Path) -> MovedAside | None:
    """Move every invalid line and a dead writer's torn tail out of the timeline (None: clean)."""
    path = events_path(run_dir)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits for a live append to finish: its line is not torn
        return _repair_locked(path, fd)
    finally:
        os.close(fd)


def read_events(run_dir: Path, *, after_seq: int = 0) -> list[Event]:
    """Every complete event (seq > ``after_seq``), in order. An invalid line, and a torn tail whose
    writer is gone, are moved aside with a warning (``repair_events``), never fatal."""
    path = events_path(run_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines, end = _split_complete(data)
    parsed = [_try_parse(ln) for ln in lines]
    # a tail without its newline may be an append in progress: repair_events takes the file's
    # flock first, so it only ever moves a tail whose writer is gone
    if any(e is None for e in parsed) or end < len(data):
        try:
            report = repair_events(run_dir)
        except OSError as exc:
            report = MovedAside(None, sum(e is None for e in parsed), 0, exc.strerror or str(exc))
        if report is not None:
            warn(report.message(path))
    return [e for e in parsed if e is not None and e.seq > after_seq]


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
            while True:
                fd = self._open_current()
                try:
                    size = os.fstat(fd).st_size
                    if size != self._size:
                        resynced = self._resync(fd, size)
                        if resynced is None:  # garbage was moved aside: the file was replaced
                            continue
                        self._seq, size = resynced
                    event = Event(seq=self._seq + 1, time=utcnow(), type=type, node=node,
                                  iteration=iteration, payload=payload or {})
                    line = event.model_dump_json().encode("utf-8") + b"\n"
                    os.lseek(fd, size, os.SEEK_SET)
                    view = memoryview(line)
                    try:
                        while view:
                            view = view[os.write(fd, view):]
                        os.fsync(fd)
                    except OSError:  # e.g. ENOSPC mid-line: our own partial line is taken back
                        _truncate_quietly(fd, size)
                        raise
                    self._seq, self._size = event.seq, size + len(line)
                    return event
                finally:
                    os.close(fd)  # closing releases the flock

    def _open_current(self) -> int:
        """The timeline's fd with its flock held; reopened if a repair replaced the file meanwhile."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                return fd
            os.close(fd)

    def _resync(self, fd: int, size: int) -> tuple[int, int] | None:
        """Read the last seq from the file's tail. A torn tail a killed writer left, or an invalid
        last line, is moved aside (``_repair_locked``) and the cleaned file read again.

        Reads backwards in growing chunks so a long timeline costs one small read. -> (seq, size),
        or None when garbage was moved aside (the file was replaced: reopen it).
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
        event = _try_parse(last) if last else None
        if complete == size and (event is not None or not last):
            return (event.seq if event else 0), complete
        # garbage at the end (a torn tail, an invalid last line): move it aside; the caller
        # reopens the cleaned file
        report = _repair_locked(self.path, fd)  # OSError (a full disk): this append fails, nothing moved
        if report is not None:
            warn(report.message(self.path))
        self._size = -1
        return None
