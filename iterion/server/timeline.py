"""What the HTTP service and the web page show about one run, read from its store (read-only).

* ``boundaries``: every ``boundary_written`` event (label, state, seq, time) in timeline order;
* ``executions``: one row per node execution (node, iteration, kind, start, duration, status),
  paired from ``node_started`` with the node's next finished/failed event of the same iteration;
* ``pause_edits``: what changed while the run was parked (a ``pause:``/``fail:`` boundary to the
  ``resume:`` that closed it): the person's edits; ``attach_files`` cuts those intervals out of
  every execution's files, so no node is credited with them;
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

from gitrefs.boundary import BoundaryLabel
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
        if e.type == ev.RUN_PAUSED:
            # the run stopped: any other execution still open (a fan-out branch the daily cap or a
            # pause cut short) was interrupted; it re-executes on resume as a row of its own
            for k in [k for k, r in open_rows.items() if k != key and r["status"] == "running"]:
                open_rows.pop(k)["status"] = "interrupted"
    for row in rows:
        row.pop("_t", None)
    return rows


_FILES_CACHE: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
_FILES_CACHE_MAX = 8192
_FILES_LOCK = threading.Lock()


def _key(label: Any) -> tuple[str, str, str] | None:
    """``kind:node:iteration`` split (``BoundaryLabel.parse``), None for any other label."""
    if not isinstance(label, str):
        return None
    try:
        parsed = BoundaryLabel.parse(label)
    except ValueError:
        return None
    return parsed.kind.value, parsed.node, str(parsed.iteration)


def _gaps(bounds: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The intervals in which nothing of the run executed: a ``pause:`` or ``fail:`` boundary and
    the ``resume:`` of the same node and iteration that closed it ("pause:/fail: open, and resume:
    closes", the same intervals a rewind's scope excludes: docs/cli-reference.md). What changed in
    between is the person's work (docs/user-guide.md, "The web page")."""
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    open_: dict[tuple[str, str], dict[str, Any]] = {}
    for b in bounds:
        k = _key(b["label"])
        if k is None:
            continue
        kind, node, it = k
        if kind in ("pause", "fail"):
            open_[(node, it)] = b
        elif kind == "resume" and (node, it) in open_:
            out.append((open_.pop((node, it)), b))
    return out


def _refs(bounds: list[dict[str, Any]]) -> dict[int, str]:
    """seq -> how GET .../files names that boundary: its label when it is the newest carrying it
    (``resolve_boundary`` picks the newest), else its state id."""
    newest: dict[str, int] = {}
    for b in bounds:
        newest[b["label"]] = b["seq"]
    return {b["seq"]: (b["label"] if newest[b["label"]] == b["seq"] else str(b["state"])) for b in bounds}


class _Changes:
    """Paths changed between two recorded states, cached (they never change) and read lazily."""

    def __init__(self, store: Store, doc: RunDoc) -> None:
        self.store, self.doc = store, doc
        self.reader: StateReader | None = None

    def __call__(self, start: Any, end: Any) -> list[str]:
        if not start or not end or start == end:
            return []
        key = (self.doc.id, str(start), str(end))
        with _FILES_LOCK:
            cached = _FILES_CACHE.get(key)
        if cached is not None:
            return list(cached)
        try:
            self.reader = self.reader or StateReader(self.store, self.doc)
            paths = [c["path"] for c in self.reader.changes(start, end)]
        except Exception:  # noqa: BLE001 - a display aid: a state that cannot be read shows no files
            return []
        with _FILES_LOCK:
            _FILES_CACHE[key] = list(paths)
            while len(_FILES_CACHE) > _FILES_CACHE_MAX:
                _FILES_CACHE.popitem(last=False)
        return paths


def attach_files(store: Store, doc: RunDoc, rows: list[dict[str, Any]], bounds: list[dict[str, Any]]) -> None:
    """Add ``files`` (paths the execution changed) and ``diff_segments`` to each row.

    An execution runs from its ``pre:`` boundary (or the ``resume:`` it was restarted from) to
    its ``nodes:``/``fail:`` boundary (its ``pause:`` while it is parked), minus every pause in
    between (``_gaps``): what changed while the run waited is yours (``pause_edits``), not the
    node's. ``diff_from``/``diff_to`` name the first segment that changed something (the page's
    "diff" button). Recorded states never change (commits and snapshots are content-addressed),
    so the paths between two of them are cached: the live page re-reads a long run cheaply."""
    changes = _Changes(store, doc)
    gaps = _gaps(bounds)
    refs = _refs(bounds)
    next_start: dict[int, int] = {}  # row index -> start_seq of the next row of the same execution key
    last_of: dict[tuple[Any, Any], int] = {}
    for i in range(len(rows) - 1, -1, -1):
        k = (rows[i]["node"], rows[i]["iteration"])
        if k in last_of:
            next_start[i] = rows[last_of[k]]["start_seq"]
        last_of[k] = i
    for i, row in enumerate(rows):
        tag = f"{row['node']}:{row['iteration']}"
        begin, limit = row["start_seq"], next_start.get(i, 1 << 62)
        start = next((b for b in reversed(bounds) if b["seq"] < begin
                      and b["label"] in (f"pre:{tag}", f"resume:{tag}")), None)
        end = next((b for b in bounds if begin < b["seq"] < limit and b["label"] in (f"nodes:{tag}", f"fail:{tag}")),
                   None) or next((b for b in reversed(bounds) if begin < b["seq"] < limit
                                  and b["label"] == f"pause:{tag}"), None)
        row["files"], row["diff_segments"] = [], []
        if start is None or end is None:
            continue
        cut = start
        spans: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for opened, closed in gaps:
            if cut["seq"] <= opened["seq"] and closed["seq"] <= end["seq"]:
                spans.append((cut, opened))
                cut = closed
        spans.append((cut, end))
        seen: dict[str, None] = {}
        for a, z in spans:
            paths = changes(a["state"], z["state"])
            row["diff_segments"].append({"from": refs[a["seq"]], "to": refs[z["seq"]], "from_label": a["label"],
                                         "to_label": z["label"], "files": paths})
            seen.update(dict.fromkeys(paths))
        row["files"] = list(seen)
        first = next((g for g in row["diff_segments"] if g["files"]), row["diff_segments"][0])
        row["diff_from"], row["diff_to"] = first["from"], first["to"]


def pause_edits(store: Store, doc: RunDoc, bounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What changed in the workspace while the run was parked (a ``pause:``/``fail:`` boundary to
    the ``resume:`` that closed it), one entry per pause: the person's edits, never a node's.
    ``seq`` is the boundary the pause opened at (the timeline places the entry there)."""
    changes = _Changes(store, doc)
    refs = _refs(bounds)
    out = []
    for opened, closed in _gaps(bounds):
        kind, node, it = _key(opened["label"]) or ("", "", "")
        out.append({"node": node, "iteration": int(it) if it.isdigit() else it, "stopped": kind,
                    "seq": opened["seq"], "resumed_seq": closed["seq"], "from": refs[opened["seq"]],
                    "to": refs[closed["seq"]], "from_label": opened["label"], "to_label": closed["label"],
                    "files": changes(opened["state"], closed["state"])})
    return out


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
