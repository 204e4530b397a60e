"""The HTTP service's operations over one run store, free of HTTP (so they are callable in-process).

Each method returns a JSON-able dict or raises :class:`ApiError` (HTTP status + the same one-line
``error``/``hint`` the CLI prints, and the CLI's exit code so ``iterion remote`` exits alike).
Every body is parsed into its request model (``iterion.requests``: unknown fields, wrong types
and fields the executor does not take are refused with one line, 422). Launches and resumes go to
the executor chosen at construction (iterion/server/executor.py): a detached worker process
(iterion/server/local.py, iterion/server/worker.py says why) or the work queue
(iterion/server/queued.py); cancel, pause and rewind call the engine's own functions in the
server's process, exactly as the CLI verbs do (they are short, and each takes the run's lock
itself), unless a queue runner holds the run.

Compare-and-swap: every mutating call accepts ``expected_version`` (the run document's
``version`` the client last read). A mismatch is refused with 409 "reload and retry" before
anything is written; so is the engine's own StaleWriteError when a concurrent writer wins.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

from gitrefs.persist.envsettings import env_seconds
from gitrefs.persist.errors import ErrorKind
from iterion.requests import ControlRequest, LaunchRequest, ResumeRequest, RewindRunRequest, UndoRewindRequest
from iterion.server import timeline as tl
from iterion.server.apierror import ApiError, _one_line, bad_input, from_user_error
from iterion.server.executor import Executor
from iterion.server.local import LocalExecutor
from iterion.server.pagecache import Memo, SourceCache, TtlValue
from iterion.server.queued import QueueExecutor
from iterion.store import RunDoc, RunStatus, Store
from iterion.store.subbot_tree import children_of
from iterion.workspace_checkpoint import recovery_hint

__all__ = ["ApiError", "Service", "bad_input", "from_user_error"]  # ApiError's home: iterion/server/apierror.py

def _handshake_timeout_s(env: str = "ITERION_SERVER_HANDSHAKE_S", default: float = 120.0) -> float:
    """``$env`` in seconds (> 0), else ``default``; a garbage value refuses the server's start (one
    line, exit 2). Read when the Service is built, never at import (gitrefs/persist/envsettings.py)."""
    return env_seconds(env, default, zero_ok=False)
EVENTS_PAGE_MAX = 1000
LAUNCHABLE_TTL_S = 10.0  # how long the index page's list of .bot files is kept (an edit shows at once)


def _doc_json(doc: RunDoc) -> dict[str, Any]:
    out = doc.model_dump(mode="json", exclude={"workflow_source", "workflow_sources"})
    return out


class Service:
    """The operations of the HTTP API over ``store``; paths in requests stay inside ``project``."""

    def __init__(self, store: Store, project: Path, *, log_dir: Path | None = None, queue: Any = None) -> None:
        self.store = store
        self.project = project.resolve()
        self.log_dir = log_dir or (store.root / "server" / "logs")
        # with a WorkQueue (iterion.queue.jsqueue), launches and resumes are queued for `iterion
        # runner` (iterion/server/queued.py), else they execute here (iterion/server/local.py)
        self.executor: Executor = QueueExecutor(queue) if queue is not None else LocalExecutor()
        self.handshake_timeout_s = _handshake_timeout_s()
        # the pages' caches (iterion/server/pagecache.py): a live refresh of a parked run with
        # nothing changed compiles nothing and plans no rewind; the index walks the project once
        # per LAUNCHABLE_TTL_S
        self.sources = SourceCache()
        self._source_changes: Memo[dict[str, Any] | None] = Memo()
        self._rewind_offers: Memo[Any] = Memo()
        self._parents: Memo[tuple[str | None, str | None]] = Memo(max_entries=8192)
        self._launchable_files: TtlValue[list[str]] = TtlValue(LAUNCHABLE_TTL_S)

    @property
    def queue(self) -> Any:
        """The work queue, None without one (metrics read its status)."""
        return self.executor.queue

    # -- helpers --------------------------------------------------------------------------------
    def _guard(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ApiError:
            raise
        except BaseException as exc:
            raise from_user_error(exc) from exc

    def resolve(self, ref: str) -> str:
        return self._guard(self.store.resolve_run, ref)

    def load(self, ref: str) -> RunDoc:
        rid = self.resolve(ref)
        return self._guard(self.store.load_run, rid)

    def check_version(self, doc: RunDoc, expected: Any) -> None:
        if expected is None:
            return
        if isinstance(expected, bool) or not isinstance(expected, int):
            raise bad_input(f"expected_version must be an integer, got {expected!r}")
        if doc.version != expected:
            raise ApiError(409, f"run {doc.id} was modified concurrently (expected version {expected}, "
                                f"found {doc.version}); reload the run and retry",
                           hint="GET the run again, check its status, then retry", exit_code=ErrorKind.REFUSED,
                           extra={"reason": "stale_version", "version": doc.version})

    def confine(self, raw: Any, what: str) -> Path:
        """A path of a request, resolved against the project and refused outside it."""
        if not isinstance(raw, str) or not raw or "\0" in raw:
            raise bad_input(f"{what} must be a non-empty path string")
        path = Path(raw)
        if not path.is_absolute():
            path = self.project / path
        real = Path(os.path.realpath(path))
        if real != self.project and not real.is_relative_to(self.project):
            raise bad_input(f"{what} {raw} is outside the project {self.project}",
                            hint="the service only reads and runs files inside the project it was started in")
        return real

    def check_script(self, raw: Any) -> str | None:
        if raw is None:
            return None
        script = self.confine(raw, "script")
        if not script.exists():
            raise bad_input(f"--script {raw}: no such file", hint="give the path of the script backend's answers file")
        if not script.is_file():
            raise bad_input(f"--script {raw} is not a regular file",
                            hint="give the path of the script backend's answers file")
        return str(script)

    # -- reads ----------------------------------------------------------------------------------
    def list_runs(self, status: str | None = None, workflow: str | None = None, limit: int | None = None,
                  since: str | None = None, after: str | None = None) -> dict[str, Any]:
        """A page of the run index (iterion/store/runindex.py), newest first; ``next`` is the cursor
        of the following page (None on the last), ``total`` how many runs match the filters, ``more``
        how many of them come after this page."""
        from iterion.store.runindex import parse_since

        if status is not None and status not in {s.value for s in RunStatus} | {"corrupt"}:
            raise bad_input(f"unknown status {status!r} (statuses: {', '.join(s.value for s in RunStatus)})")
        if limit is not None and limit < 1:
            raise bad_input(f"limit must be at least 1, got {limit}")
        try:
            since_at = parse_since(since) if since else None
        except ValueError as exc:
            raise bad_input(str(exc), hint="e.g. since=2d or since=2026-12-01") from None
        page = self._guard(self.store.run_page, status={status} if status else None, workflow=workflow,
                           since=since_at, after=after, limit=limit)
        rows: list[dict[str, Any]] = []
        for r in page.rows:
            if r.corrupt:
                rows.append({"id": r.id, "name": None, "status": r.status, "workflow": None, "created_at": None,
                             "updated_at": None, "failure_code": None, "error": f"run.json is corrupt ({r.error})"})
            else:
                rows.append({"id": r.id, "name": r.name, "status": r.status, "workflow": r.workflow,
                             "created_at": r.created, "updated_at": r.updated, "failure_code": r.failure_code,
                             "error": r.error, "mode": r.mode, "version": r.version, "parent": r.parent})
        return {"runs": rows, "total": page.total, "next": page.next, "more": page.more}

    def tag_subbot_parents(self, rows: list[dict[str, Any]]) -> None:
        """Add ``parent_run``/``parent_node`` (the subbot that launched it) to each run-list row;
        read from the run's document once per (run, version): the index holds no such column."""
        def read(rid: str) -> tuple[str | None, str | None]:
            try:
                doc = self.store.load_run(rid)
            except Exception:  # noqa: BLE001 - a listing aid: an unreadable run is listed as a top-level one
                return (None, None)
            return (doc.parent_run, doc.parent_node)

        for r in rows:
            if r.get("version") is None:
                continue
            rid: str = r["id"]
            r["parent_run"], r["parent_node"] = self._parents.get_or((rid, r["version"]), partial(read, rid))

    def get_run(self, ref: str) -> dict[str, Any]:
        doc = self.load(ref)
        cp = self._guard(self.store.load_checkpoint, doc.id)
        events = self._guard(self.store.read_events, doc.id)
        run = _doc_json(doc)
        hint = self._guard(recovery_hint, self.store, doc.id)  # an unreadable timeline is an error
        if hint is not None:
            run["workspace_checkpoint"] = hint
        bounds = tl.boundaries(events)
        rows = tl.executions(events)
        tl.attach_files(self.store, doc, rows, bounds)
        from iterion.rewind.undo import undoable

        rec = None if self.store.shared and not self.store.run_dir(doc.id).is_dir() else undoable(self.store, doc.id)
        return {
            # the last rewind, while `rewind --undo` (POST .../rewind/undo) would still take it back
            "undo": None if rec is None else {"to_node": rec.to_node, "rewound_seq": rec.rewound_seq,
                                              "files": rec.touched},
            "run": run,
            "checkpoint": None if cp is None else {
                "restart_node": cp.restart_node, "anchor": cp.anchor_reason.value,
                "outputs": cp.outputs, "executed": [f"{e.node}:{e.iteration}" for e in cp.executed],
                "consumed": cp.accounting.model_dump(mode="json")},
            "pending": cp.pending_interaction.model_dump(mode="json") if cp and cp.pending_interaction else None,
            "executions": rows,
            # what changed while the run was parked (pause:/fail: -> resume:): the person's edits,
            # excluded from the executions' files
            "pause_edits": tl.pause_edits(self.store, doc, bounds),
            "boundaries": bounds,
            "last_seq": events[-1].seq if events else 0,
            "executing": self.store.is_locked(doc.id),  # a process holds the run's lock right now
            # the subbot tree below this run (its parent is run["parent_run"] / run["parent_node"])
            "subbot_children": self._guard(children_of, self.store, doc),
        }

    def events(self, ref: str, after: int = 0, limit: int = 500) -> dict[str, Any]:
        if after < 0:
            raise bad_input(f"after must be >= 0, got {after}")
        if not 1 <= limit <= EVENTS_PAGE_MAX:
            raise bad_input(f"limit must be between 1 and {EVENTS_PAGE_MAX}, got {limit}")
        rid = self.resolve(ref)
        events = self._guard(self.store.read_events, rid, after_seq=after)
        page = events[:limit]
        return {"run_id": rid, "events": [e.model_dump(mode="json") for e in page],
                "next_after": page[-1].seq if page else after, "more": len(events) > limit}

    def commits(self, ref: str) -> dict[str, Any]:
        doc = self.load(ref)
        events = self._guard(self.store.read_events, doc.id)
        bounds = tl.boundaries(events)
        out: dict[str, Any] = {"run_id": doc.id, "mode": doc.workspace_mode.value}
        reason = None
        if doc.workspace_mode.value != "worktree":
            reason = "in_place"  # its boundaries are tracker snapshots, not commits: see /files
        elif doc.worktree is None or not doc.worktree.base_commit:
            reason = "no_baseline"
        elif not bounds:
            reason = "no_boundaries"
        if reason is not None:
            out.update({"available": False, "reason": reason, "commits": [], "boundaries": bounds})
            hint = self._guard(recovery_hint, self.store, doc.id)
            if hint is not None:
                out["workspace_checkpoint"] = hint
            return out
        assert doc.worktree is not None
        out.update({"available": True, "base_commit": doc.worktree.base_commit, "branch": doc.worktree.branch,
                    "commits": [{"label": b["label"], "commit": b["state"], "seq": b["seq"], "time": b["time"]}
                                for b in bounds]})
        return out

    def files(self, ref: str, frm: str | None, to: str | None) -> dict[str, Any]:
        if not frm or not to:
            raise bad_input("give both from=LABEL and to=LABEL (boundary labels such as pre:write:0, nodes:write:0)")
        doc = self.load(ref)
        bounds = tl.boundaries(self._guard(self.store.read_events, doc.id))
        try:
            a, b = tl.resolve_boundary(bounds, frm), tl.resolve_boundary(bounds, to)
        except tl.BoundaryNotFound as exc:
            raise ApiError(404, str(exc), hint=f"list them with GET /api/runs/{doc.id}", exit_code=ErrorKind.BAD_INPUT) from None
        try:
            reader = tl.StateReader(self.store, doc)
            changes = reader.changes(a["state"], b["state"])
            diff, truncated = reader.unified_diff(a["state"], b["state"])
        except tl.BoundaryNotFound as exc:
            raise ApiError(404, str(exc), exit_code=ErrorKind.BAD_INPUT) from None
        except Exception as exc:  # noqa: BLE001
            raise ApiError(409, f"cannot read the recorded states of run {doc.id}: {_one_line(str(exc))}",
                           exit_code=ErrorKind.REFUSED) from None
        return {"run_id": doc.id, "from": a, "to": b, "files": changes, "diff": diff, "truncated": truncated}

    # -- artifacts and attachments (what they return: iterion/store/readers.py) -------------------
    def artifacts(self, ref: str, node: str | None = None) -> dict[str, Any]:
        from iterion.store.readers import list_artifacts

        rid = self.resolve(ref)
        entries = self._guard(list_artifacts, self.store, rid, node)
        return {"run_id": rid, "artifacts": [e.to_json() for e in entries]}

    def artifact(self, ref: str, node: str, version: str) -> tuple[dict[str, Any], bytes]:
        from iterion.store.readers import parse_version, read_artifact

        rid = self.resolve(ref)
        wanted = self._guard(parse_version, version)
        entry, data = self._guard(read_artifact, self.store, rid, node, wanted)
        return {"run_id": rid, **entry.to_json()}, data

    def attachments(self, ref: str) -> dict[str, Any]:
        from iterion.store.readers import list_attachments

        rid = self.resolve(ref)
        return {"run_id": rid, "attachments": self._guard(list_attachments, self.store, rid)}

    def attachment(self, ref: str, name: str) -> tuple[dict[str, Any], Path]:
        from iterion.store.readers import attachment_file

        rid = self.resolve(ref)
        record, path = self._guard(attachment_file, self.store, rid, name)
        return {"run_id": rid, **record}, path

    # -- executions (the executor chosen at construction: iterion/server/executor.py) ------------
    def store_spec(self) -> dict[str, Any]:
        """How a worker opens this very store: the same JetStream server and prefix, or files
        ("off" so an ITERION_NATS_URL in the environment cannot send it elsewhere)."""
        docs: Any = self.store.docs
        if self.store.shared:
            return {"store_dir": str(self.store.root), "nats": docs.url, "nats_prefix": docs.prefix}
        return {"store_dir": str(self.store.root), "nats": "off"}

    def confine_answers(self, answers: dict[str, Any]) -> dict[str, Any]:
        """A file answer (``@path``; ``@@`` is a literal @) may only name a file inside the project,
        in either answers shape (flat, or keyed by node)."""
        out = dict(answers)
        for key, value in answers.items():
            if isinstance(value, dict):
                out[key] = self.confine_answers(value)
            elif isinstance(value, str) and value.startswith("@") and not value.startswith("@@"):
                out[key] = "@" + str(self.confine(value[1:], f"answer {key} file"))
        return out

    def launch(self, body: dict[str, Any]) -> dict[str, Any]:
        req = self._guard(LaunchRequest.parse, body, executor=self.executor.kind)
        return self._guard(self.executor.launch, self, req)

    def resume(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        req = self._guard(ResumeRequest.parse, body, executor=self.executor.kind)
        doc = self.load(ref)
        self.check_version(doc, req.expected_version)
        return self._guard(self.executor.resume, self, doc, req)

    # -- operator verbs (in process: the engine's own functions) ----------------------------------
    def cancel(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        from iterion.engine.operator_verbs import cancel_run

        return self._control(ref, body, "cancel", "cancelled by operator (iterion server)", cancel_run)

    def pause(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        from iterion.engine.operator_verbs import pause_run

        return self._control(ref, body, "pause", "paused by operator (iterion server)", pause_run)

    def _control(self, ref: str, body: dict[str, Any], action: str, default_reason: str, act: Any) -> dict[str, Any]:
        req = self._guard(ControlRequest.parse, body, executor=self.executor.kind)
        doc = self.load(ref)
        self.check_version(doc, req.expected_version)
        reason = req.reason or default_reason
        answer = self.executor.control(self, doc.id, action, reason, req.wait)
        if answer is not None:
            return answer
        return dict(self._guard(act, self.store, doc.id, wait_s=req.wait, reason=reason).to_json())

    def rewind(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        from iterion.rewind.files import RestoreScope
        from iterion.rewind.rewind import RewindRequest, rewind_run

        req = self._guard(RewindRunRequest.parse, body, executor=self.executor.kind)
        doc = self.load(ref)
        self.check_version(doc, req.expected_version)
        file = self.confine(req.file, "file") if req.file else self.executor.rewind_source(self, doc)
        scope = RestoreScope(req.restore_scope) if req.restore_scope is not None else None
        rewind = RewindRequest(run_id=doc.id, node=req.node, auto=req.auto, restore_scope=scope, file=file,
                               dry_run=req.dry_run)
        result = self._guard(rewind_run, self.store, rewind)
        return dict(result.to_json())

    def undo_rewind(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        """``iterion rewind --undo``: the same function, so the web's "Undo this rewind" and the
        CLI put back exactly the same files and checkpoint (and refuse alike once the run moved on)."""
        from iterion.rewind.undo import undo_rewind

        req = self._guard(UndoRewindRequest.parse, body, executor=self.executor.kind)
        doc = self.load(ref)
        self.check_version(doc, req.expected_version)
        return dict(self._guard(undo_rewind, self.store, doc.id).to_json())

    # -- start-up ---------------------------------------------------------------------------------
    def reconcile(self) -> list[dict[str, Any]]:
        from iterion.engine.stale import reconcile_orphans

        return [p.to_json() for p in reconcile_orphans(self.store)]

    def ready(self) -> dict[str, Any]:
        from gitrefs.persist.writable import nearest_existing, unwritable_reason

        root = self.store.root  # created by the first run: ready when it (or where it goes) is writable
        reason = unwritable_reason(nearest_existing(root))
        out = {"ready": reason is None, "store": str(root), **({"reason": reason} if reason else {})}
        if self.store.shared:
            out["documents"] = self.store.where()
        return out

    # -- the web page's views (iterion/server/web.py renders them) --------------------------------
    def current_source(self, doc: RunDoc) -> Any:
        """The run's workflow compiled from disk as a resume would (``iterion.engine.resume``'s
        path choice: bundle, else file), or None when it is gone or does not compile. Compiled
        once per state of its files (``SourceCache``)."""
        path = doc.bundle_path or doc.file_path
        if not path or not Path(path).exists():
            return None
        try:
            return self.sources.compile(path)
        except Exception:  # noqa: BLE001 - a display aid: the resume itself names the problem
            return None

    def source_change(self, doc: RunDoc, src: Any) -> dict[str, Any] | None:
        """When the workflow on disk no longer has the digest the run recorded: the declaration
        diff ``rewind --auto --dry-run`` computes (the same call, nothing changes), for the page's
        "Resume with updated workflow (force)" action. None when the source is unchanged."""
        if src is None or src.digest == doc.workflow_digest or doc.workflow_digest == src.bare_digest:
            return None
        # the dry run reads the checkpoint (moves with the version) and the source (its digest)
        return self._source_changes.get_or((doc.id, src.digest, doc.version), lambda: self._plan_change(doc, src))

    def _plan_change(self, doc: RunDoc, src: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"file": str(src.path), "recorded": doc.workflow_digest, "current": src.digest,
                               "changes": [], "pivot": None, "candidates": [], "problem": None}
        try:
            plan = self.rewind(doc.id, {"auto": True, "dry_run": True})
        except ApiError as exc:
            out["problem"] = exc.message
            return out
        auto = plan.get("auto") or {}
        out.update(changes=list(auto.get("changes") or []), pivot=plan.get("to_node"),
                   candidates=list(auto.get("candidates") or []))
        return out

    def run_view(self, ref: str) -> dict[str, Any]:
        """``get_run`` plus what only the page shows: the graph of the workflow on disk, coloured by
        the timeline's statuses, the source change (both None when the file cannot be read), and
        on each execution row the rewind it offers (``rewind``: see ``mark_rewinds``)."""
        from iterion.server.graph import node_statuses, workflow_svg

        detail = self.get_run(ref)
        doc = self.load(detail["run"]["id"])
        src = self.current_source(doc)
        children = {c["node"]: c for c in detail.get("subbot_children") or []}
        detail["graph_svg"] = None if src is None else workflow_svg(src.workflow, node_statuses(detail["executions"]),
                                                                    children)
        parked = doc.status.value not in ("running", "queued", "finished", "failed")
        detail["source_change"] = self.source_change(doc, src) if parked else None
        self.mark_rewinds(doc, detail, src)
        return detail

    def mark_rewinds(self, doc: RunDoc, detail: dict[str, Any], src: Any) -> None:
        """Each execution row's ``rewind``: ``{"offered": true, "pivot": NODE}`` on the row a
        ``rewind --node`` of its node goes back to, else ``{"offered": false, "why": ...}`` (the
        rules' home: iterion/rewind/offer.py). ``rewind_refused`` says why none is offered at all."""
        from iterion.rewind.offer import RewindOffers, rewind_offers

        def compute() -> RewindOffers:
            cp = self._guard(self.store.load_checkpoint, doc.id)
            return rewind_offers(self.store, doc, cp, None if src is None else src.workflow)

        # the offers read the checkpoint and the boundaries (both move with the version or a new
        # event) and the workflow's fan-outs (its digest)
        key = (doc.id, doc.version, detail.get("last_seq"), None if src is None else src.digest)
        offers = self._rewind_offers.get_or(key, compute)
        detail["rewind_refused"] = offers.refused
        for row in detail.get("executions") or []:
            node, it = row.get("node"), row.get("iteration")
            if row.get("rewound"):
                row["rewind"] = {"offered": False, "reason": "rewound", "why": "a rewind already dropped this execution"}
            elif offers.refused:
                row["rewind"] = {"offered": False, "reason": "status", "why": offers.refused}
            elif node not in offers.targets:
                row["rewind"] = {"offered": False, "reason": "refused",
                                 "why": f"`iterion rewind --node {node}` would refuse: no recorded start boundary "
                                        "(pre:) for it, or it is not in the workflow on disk"}
            elif offers.latest.get(node) != it or row.get("status") == "running":
                row["rewind"] = {"offered": False, "reason": "not_latest", "latest": offers.latest.get(node),
                                 "why": f"a rewind to {node} goes back to its latest execution (iteration "
                                        f"{offers.latest.get(node)}): offered on that row"}
            else:
                pivot, pit = offers.targets[node]
                row["rewind"] = {"offered": True, "pivot": pivot, "iteration": pit}
        # several rows of one execution key (a replay after a rewind): only the newest offers it
        seen: set[tuple[Any, Any]] = set()
        for row in reversed(detail.get("executions") or []):
            k = (row.get("node"), row.get("iteration"))
            if row.get("rewind", {}).get("offered") and k in seen:
                row["rewind"] = {"offered": False, "reason": "not_latest", "latest": row.get("iteration"),
                                 "why": "a later execution of this node and iteration is the one a rewind goes back to"}
            seen.add(k)

    def launchable(self, limit: int = 200) -> list[dict[str, Any]]:
        """The workflow files the launch form offers: ``.bot`` files under the project (never
        through a symlink, never in a hidden or dependency directory), each with its declared vars;
        a file that does not compile is listed with its problem instead."""
        files = self._launchable_files.get(limit, lambda: self._walk_bots(limit))
        return [self.workflow_decl(rel) for rel in files if (self.project / rel).is_file()]  # gone since the walk

    def _walk_bots(self, limit: int) -> list[str]:
        found: list[str] = []
        for top, dirs, files in os.walk(self.project, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
            for name in sorted(files):
                if not name.endswith(".bot"):
                    continue
                full = Path(top) / name
                if full.is_symlink():
                    continue
                found.append(str(full.relative_to(self.project)))
                if len(found) >= limit:
                    return found
        return found

    def workflow_decl(self, raw: str) -> dict[str, Any]:
        """One workflow file of the project and its declared vars (name, type, default). Refused
        (422) outside the project: ``..``, an absolute path, or a symlink leading out."""
        if not isinstance(raw, str) or Path(raw).is_absolute() or ".." in Path(raw).parts:
            raise bad_input(f"workflow {raw} is not a relative path inside the project",
                            hint="give a path such as flows/main.bot, relative to the project")
        path = self.confine(raw, "workflow")
        if not path.is_file():
            raise bad_input(f"workflow {raw}: no such file", hint="give the path of a .bot file inside the project")
        rel = str(path.relative_to(self.project))
        try:
            wf = self.sources.compile(path).workflow
        except Exception as exc:  # noqa: BLE001 - listed with its problem; the launch names it again
            return {"file": rel, "name": None, "vars": [], "problem": _one_line(str(exc))}
        vars_ = [{"name": v.name, "type": v.type.value, "default": v.default if v.has_default else None,
                  "required": not v.has_default} for v in wf.vars.values()]
        return {"file": rel, "name": wf.name, "vars": vars_, "problem": None}


SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
