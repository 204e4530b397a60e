"""What the HTTP service and the web page show about one run, read from its store (read-only).

* ``boundaries``: every ``boundary_written`` event (label, state, seq, time) in timeline order;
* ``executions``: one row per node execution (node, iteration, kind, start, duration, status),
  paired from ``node_started`` with the node's next finished/failed event of the same iteration;
* ``changes`` / ``unified_diff``: what differs between two recorded states of the run's
  workspace. A worktree run's states are git commits (read with pygit2 from the repository the
  run recorded); an in-place run's are the tracker's snapshots (read from ``runs/<run>/track``).
  Nothing here writes: no lock, no index, no workspace file is touched.
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any

from iterion.store import Event, RunDoc, Store, WorkspaceMode
from iterion.store import events as ev

DIFF_FILE_CAP = 256 * 1024  # bytes of one file's side shown as text; larger files are summarised
DIFF_TOTAL_CAP = 2 * 1024 * 1024  # characters of one unified diff answer


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
    for e in events:
        key = (e.node, e.iteration)
        if e.type == ev.NODE_STARTED:
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
        elif e.type in (ev.RUN_PAUSED, ev.HUMAN_INPUT_REQUESTED) and key in open_rows:
            open_rows[key]["status"] = "paused"
        elif e.type in (ev.RUN_CANCELLED, ev.RUN_FAILED, ev.RUN_REWOUND, ev.RUN_ORPHAN_PROMOTED):
            for row in open_rows.values():
                if row["status"] == "running":
                    row["status"] = "interrupted"
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


def resolve_boundary(bounds: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    """A boundary by label (the newest one carrying it), or by state id."""
    for b in reversed(bounds):
        if b["label"] == ref or b["state"] == ref:
            return b
    known = ", ".join(b["label"] for b in bounds[-8:]) or "none recorded"
    raise BoundaryNotFound(f"no boundary {ref!r} in this run (latest: {known})")


class StateReader:
    """Read two recorded states of one run's workspace (see module doc)."""

    def __init__(self, store: Store, doc: RunDoc) -> None:
        self.doc = doc
        self.git = doc.workspace_mode is WorkspaceMode.WORKTREE
        if self.git:
            import pygit2

            repo_dir = doc.options.get("repo_dir") or (doc.worktree.path if doc.worktree else doc.workspace_dir)
            self.repo = pygit2.Repository(str(repo_dir))
        else:
            from workspacetrack.store import TrackStore

            self.track = TrackStore(store.run_dir(doc.id) / "track", doc.id)
            state = self.track.load_state()
            if state is None:
                raise BoundaryNotFound(f"run {doc.id} recorded no workspace snapshot")
            self.state = state

    # -- git ----------------------------------------------------------------------------------
    def _tree(self, rev: str) -> Any:
        import pygit2

        return self.repo.revparse_single(rev).peel(pygit2.Tree)

    def _git_diff(self, a: str, b: str) -> Any:
        return self._tree(a).diff_to_tree(self._tree(b))

    # -- workspacetrack -----------------------------------------------------------------------
    def _manifest(self, snap: str) -> Any:
        return self.track.read_manifest(self.track.snapshot(self.state, snap).manifest)

    def changes(self, a: str, b: str) -> list[dict[str, Any]]:
        if self.git:
            status = {1: "added", 2: "deleted", 3: "modified", 4: "renamed", 5: "copied", 8: "typechange"}
            out = []
            for patch in self._git_diff(a, b):
                d = patch.delta
                out.append({"path": d.new_file.path or d.old_file.path, "kind": status.get(d.status, "modified")})
            return sorted(out, key=lambda c: c["path"])
        from workspacetrack.changes import diff_manifests

        return [{"path": c.path, "kind": c.kind} for c in diff_manifests(self._manifest(a), self._manifest(b))]

    def unified_diff(self, a: str, b: str) -> tuple[str, bool]:
        """(unified diff text, truncated)."""
        if self.git:
            text = self._git_diff(a, b).patch or ""
            return (text[:DIFF_TOTAL_CAP], len(text) > DIFF_TOTAL_CAP)
        from workspacetrack.changes import diff_manifests

        ma, mb = self._manifest(a), self._manifest(b)
        parts: list[str] = []
        total = 0
        for c in diff_manifests(ma, mb):
            old = self._text(c.old_hash, ma.entries.get(c.path))
            new = self._text(c.new_hash, mb.entries.get(c.path))
            if old is None or new is None:
                chunk = f"Binary or large file {c.path} {c.kind}\n"
            else:
                chunk = "".join(difflib.unified_diff(
                    old.splitlines(keepends=True), new.splitlines(keepends=True),
                    fromfile="/dev/null" if c.kind == "added" else f"a/{c.path}",
                    tofile="/dev/null" if c.kind == "deleted" else f"b/{c.path}"))
                if c.kind == "mode_changed":
                    chunk = f"mode of {c.path} changed {oct(c.old_mode or 0)} -> {oct(c.new_mode or 0)}\n"
            if total + len(chunk) > DIFF_TOTAL_CAP:
                return "".join(parts), True
            parts.append(chunk)
            total += len(chunk)
        return "".join(parts), False

    def _text(self, digest: str | None, entry: Any) -> str | None:
        if digest is None:
            return ""
        size = entry[2] if entry is not None and len(entry) > 2 and isinstance(entry[2], int) else 0
        if size > DIFF_FILE_CAP:
            return None
        try:
            data = self.track.objects.read(digest)
        except Exception:  # noqa: BLE001 - a missing object is shown as unreadable, not an error page
            return None
        if len(data) > DIFF_FILE_CAP or b"\0" in data[:8192]:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None


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
