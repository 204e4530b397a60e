"""What the HTTP service and the web page show about one run, read from its store (read-only).

* ``boundaries``: every ``boundary_written`` event (label, state, seq, time) in timeline order;
* ``executions``: one row per node execution (node, iteration, kind, start, duration, status),
  paired from ``node_started`` with the node's next finished/failed event of the same iteration;
* ``changes`` / ``unified_diff``: what differs between two recorded states of the run's
  workspace, read through the run's versioning mechanism (``open_state_reader``: a worktree
  run's commits, an in-place run's snapshots). Nothing here writes: no lock, no index, no
  workspace file is touched.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

from iterion.engine.versioning import open_state_reader
from iterion.rewind.undo import RUN_REWIND_UNDONE  # the event's home: the undo that appends it
from iterion.store import Event, RunDoc, Store
from iterion.store import events as ev


class BoundaryNotFound(LookupError):
    pass


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def boundaries(events: list[Event]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        p = ev.payload(e, ev.BoundaryWrittenPayload)
        if e.type == ev.BOUNDARY_WRITTEN and isinstance(p.get("label"), str):
            out.append({"label": p.get("label"), "state": p.get("state"), "seq": e.seq,
                        "time": _iso(e.time), "node": e.node, "iteration": e.iteration,
                        "mechanism": p.get("mechanism")})
    return out


def executions(events: list[Event]) -> list[dict[str, Any]]:
    """Node executions in start order; ``status`` running|finished|failed|paused|interrupted."""
    rows: list[dict[str, Any]] = []
    open_rows: dict[tuple[str | None, int | None], dict[str, Any]] = {}
    parked: dict[tuple[str | None, int | None], dict[str, Any]] = {}  # paused rows a cancel closed
    rewinds: list[list[dict[str, Any]]] = []  # the rows each rewind marked (an undo unmarks them)
    for e in events:
        key = (e.node, e.iteration)
        resumed = open_rows.get(key) or parked.pop(key, None)
        if e.type == ev.NODE_STARTED and resumed is not None and resumed["status"] == "paused":
            # the same execution carrying on after its pause (a gate answered): one row, not two
            resumed["status"] = "running"
            open_rows[key] = resumed
        elif e.type == ev.NODE_STARTED:
            row: dict[str, Any] = {"node": e.node, "iteration": e.iteration,
                                   "kind": ev.payload(e, ev.NodeStartedPayload).get("kind"), "start": _iso(e.time),
                                   "start_seq": e.seq, "end": None, "duration_s": None, "status": "running",
                                   "_t": e.time}
            stale = open_rows.pop(key, None)
            if stale is not None:
                stale["status"] = "interrupted"
            open_rows[key] = row
            rows.append(row)
        elif e.type in (ev.NODE_FINISHED, ev.NODE_FAILED) and key in open_rows:
            row = open_rows.pop(key)
            row["status"] = "finished" if e.type == ev.NODE_FINISHED else "failed"
            if e.type == ev.NODE_FINISHED and "output" in (e.payload or {}):
                row["output"] = ev.payload(e, ev.NodeFinishedPayload).get("output")
            row["end"] = _iso(e.time)
            row["duration_s"] = round((e.time - row["_t"]).total_seconds(), 3)
            if e.type == ev.NODE_FAILED:
                failed = ev.payload(e, ev.NodeFailedPayload)
                row["error"] = failed.get("error")
                row["code"] = failed.get("code")
        elif e.type == ev.WARNING and key in open_rows:
            # e.g. a tool_output_mismatch: shown on the execution it concerns
            warned = ev.payload(e, ev.WarningPayload)
            open_rows[key].setdefault("warnings", []).append({"code": warned.get("code"), "message": warned.get("message")})
        elif e.type == ev.ARTIFACT_PUBLISHED and key in open_rows:
            # the artifact this execution published: the page links it (GET .../artifacts/NODE/VERSION)
            published = ev.payload(e, ev.ArtifactPublishedPayload)
            open_rows[key]["artifact"] = {"name": published.get("name"), "version": published.get("version")}
        elif e.type == ev.RUN_REWOUND:
            # the pivot's execution and everything started after it: their outputs were dropped
            back = ev.payload(e, ev.RunRewoundPayload)
            pivot = next((r for r in reversed(rows) if r["node"] == back.get("to_node")
                          and r["iteration"] == back.get("to_iteration")), None)
            marked = [] if pivot is None else [r for r in rows if r["start_seq"] >= pivot["start_seq"]
                                                and not r.get("rewound")]
            for r in marked:
                r["rewound"] = True
            rewinds.append(marked)
            parked.clear()
        elif e.type == RUN_REWIND_UNDONE and rewinds:
            for r in rewinds.pop():
                r.pop("rewound", None)
        elif e.type in (ev.RUN_PAUSED, ev.HUMAN_INPUT_REQUESTED) and key in open_rows:
            open_rows[key]["status"] = "paused"
        elif e.type in (ev.RUN_CANCELLED, ev.RUN_FAILED, ev.RUN_REWOUND, ev.RUN_ORPHAN_PROMOTED):
            for row in open_rows.values():
                if row["status"] == "running":
                    row["status"] = "interrupted"
                elif row["status"] == "paused":
                    parked[(row["node"], row["iteration"])] = row
            open_rows.clear()
    for row in rows:
        row.pop("_t", None)
    return rows


_FILES_CACHE: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
_FILES_CACHE_MAX = 8192
_FILES_LOCK = threading.Lock()


def attach_files(store: Store, doc: RunDoc, rows: list[dict[str, Any]], bounds: list[dict[str, Any]]) -> None:
    """Add ``files`` (paths the execution changed: its ``pre:`` boundary to its closing one).

    Recorded states never change (commits and snapshots are content-addressed), so the paths
    between two of them are cached: the live page re-reads a long run's timeline cheaply."""
    by_label = {b["label"]: b["state"] for b in bounds}
    reader = None
    for row in rows:
        start = by_label.get(f"pre:{row['node']}:{row['iteration']}")
        end = None
        for kind in ("nodes", "fail", "pause"):
            end = by_label.get(f"{kind}:{row['node']}:{row['iteration']}") or end
            if end:
                break
        if start and end:  # the labels the page's "diff" button asks GET .../files for
            row["diff_from"], row["diff_to"] = f"pre:{row['node']}:{row['iteration']}", _closing(by_label, row)
        if not start or not end:
            row["files"] = []
            continue
        if start == end:
            row["files"] = []
            continue
        key = (doc.id, start, end)
        with _FILES_LOCK:
            cached = _FILES_CACHE.get(key)
        if cached is not None:
            row["files"] = list(cached)
            continue
        try:
            reader = reader or StateReader(store, doc)
            paths = [c["path"] for c in reader.changes(start, end)]
        except Exception:  # noqa: BLE001 - a display aid: a state that cannot be read shows no files
            row["files"] = []
            continue
        row["files"] = paths
        with _FILES_LOCK:
            _FILES_CACHE[key] = list(paths)
            while len(_FILES_CACHE) > _FILES_CACHE_MAX:
                _FILES_CACHE.popitem(last=False)


def _closing(by_label: dict[str, Any], row: dict[str, Any]) -> str | None:
    for kind in ("nodes", "fail", "pause"):
        label = f"{kind}:{row['node']}:{row['iteration']}"
        if by_label.get(label):
            return label
    return None


def resolve_boundary(bounds: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    """A boundary by label (the newest one carrying it), or by state id."""
    for b in reversed(bounds):
        if b["label"] == ref or b["state"] == ref:
            return b
    known = ", ".join(b["label"] for b in bounds[-8:]) or "none recorded"
    raise BoundaryNotFound(f"no boundary {ref!r} in this run (latest: {known})")


class StateReader:
    """Read two recorded states of one run's workspace (see module doc): the run's mechanism's
    reader (``iterion.engine.versioning.open_state_reader``), with rows as JSON."""

    def __init__(self, store: Store, doc: RunDoc) -> None:
        self.doc = doc
        reader = open_state_reader(store, doc)
        if reader is None:
            raise BoundaryNotFound(f"run {doc.id} recorded no workspace snapshot")
        self.reader = reader

    def changes(self, a: str, b: str) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.reader.changes(a, b)]

    def unified_diff(self, a: str, b: str) -> tuple[str, bool]:
        """(unified diff text, truncated)."""
        return self.reader.unified_diff(a, b)


def truncations(outputs: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The streams cut to their inline share in a checkpoint's outputs (iterion/engine/outputcap.py):
    one row per node and stream, with its full size and the file holding all of it."""
    rows = []
    for node, output in (outputs or {}).items():
        marks = output.get("truncated") if isinstance(output, dict) else None
        if not isinstance(marks, dict):
            continue
        for stream, mark in marks.items():
            if isinstance(mark, dict) and mark.get("truncated"):
                rows.append({"node": node, "stream": stream, "size": mark.get("size"), "kept": mark.get("kept"),
                             "path": mark.get("path")})
    return rows
