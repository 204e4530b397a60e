"""The HTTP service's operations over one run store, free of HTTP (so they are callable in-process).

Each method returns a JSON-able dict or raises :class:`ApiError` (HTTP status + the same one-line
``error``/``hint`` the CLI prints, and the CLI's exit code so ``iterion remote`` exits alike).
Launches and resumes execute in a detached worker process (iterion/server/worker.py says why);
cancel, pause and rewind call the engine's own functions in the server's process, exactly as the
CLI verbs do (they are short, and each takes the run's lock itself).

Compare-and-swap: every mutating call accepts ``expected_version`` (the run document's
``version`` the client last read). A mismatch is refused with 409 "reload and retry" before
anything is written; so is the engine's own StaleWriteError when a concurrent writer wins.
"""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gitrefs.persist import UserError
from gitrefs.persist.envsettings import env_seconds
from gitrefs.persist.errors import ErrorCode
from gitrefs.persist.oserror import environment_error
from iterion.budget import BudgetAsk, DurationError, parse_duration
from iterion.server import timeline as tl
from iterion.store import RunDoc, RunStatus, Store
from iterion.store.errors import (
    CorruptDocumentError,
    InvalidTransitionError,
    LockHeldError,
    RunNotFoundError,
    StaleWriteError,
    StatusRefusedError,
    StoreUnavailableError,
)
from iterion.store.ids import new_id
from iterion.store.readers import ItemNotFoundError
from iterion.workspace_checkpoint import recovery_hint

BUDGET_FIELDS = ("max_cost_usd", "max_tokens", "max_duration", "max_iterations", "max_parallel_branches")
def _handshake_timeout_s(env: str = "ITERION_SERVER_HANDSHAKE_S", default: float = 120.0) -> float:
    """``$env`` in seconds (> 0), else ``default``; a garbage value refuses the server's start (one
    line, exit 2). Read when the Service is built, never at import (gitrefs/persist/envsettings.py)."""
    return env_seconds(env, default, zero_ok=False)
EVENTS_PAGE_MAX = 1000


class ApiError(Exception):
    """An HTTP refusal: ``status`` the HTTP code, ``message``/``hint`` one line each."""

    def __init__(self, status: int, message: str, *, hint: str | None = None, exit_code: int = ErrorCode.BAD_INPUT,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.hint, self.exit_code = status, message, hint, exit_code
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "hint": self.hint, "exit_code": self.exit_code, **self.extra}


def _one_line(text: str | None) -> str | None:
    return None if text is None else text.replace("\r", "\\r").replace("\n", "\\n")


def from_user_error(exc: BaseException) -> ApiError:
    """The HTTP shape of an engine/store refusal (the same message the CLI prints)."""
    env = environment_error(exc)
    if env is not None:  # the server's disk or permissions, not the request: 503, the CLI's line
        return ApiError(503, _one_line(env.message) or "", hint=_one_line(env.hint), exit_code=env.exit_code)
    if not isinstance(exc, UserError):
        return ApiError(500, f"internal error: {type(exc).__name__}: {_one_line(str(exc))}", exit_code=ErrorCode.INTERNAL,
                        hint="see the server's log; re-run with ITERION_DEBUG=1 for the traceback")
    message, hint = _one_line(exc.message or str(exc)) or "", _one_line(exc.hint)
    if isinstance(exc, StoreUnavailableError):  # the shared store did not answer: try again later
        return ApiError(503, message, hint=hint, exit_code=exc.exit_code)
    if isinstance(exc, (RunNotFoundError, ItemNotFoundError)):
        return ApiError(404, message, hint=hint, exit_code=exc.exit_code)
    if isinstance(exc, StaleWriteError):
        return ApiError(409, message, hint="reload the run and retry", exit_code=exc.exit_code,
                        extra={"reason": "stale_version"})
    if isinstance(exc, (LockHeldError, StatusRefusedError, InvalidTransitionError, CorruptDocumentError)):
        return ApiError(409, message, hint=hint, exit_code=exc.exit_code)
    # exit code 2 = bad input (422); 1 = a refusal after reading the run (409)
    return ApiError(422 if exc.exit_code == ErrorCode.BAD_INPUT else 409, message, hint=hint, exit_code=exc.exit_code)


def bad_input(message: str, hint: str | None = None) -> ApiError:
    return ApiError(422, message, hint=hint, exit_code=ErrorCode.BAD_INPUT)


def budget_from_wire(raw: Any) -> BudgetAsk | None:
    """``{"budget": {...}}`` of a resume/launch -> the engine's override (0 or absent = inherit).

    Same rules and messages as the CLI's --max-* flags; the engine merges it per field over the
    launch ask persisted on the run document (``iterion.budget.merge_ask``)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise bad_input("budget must be an object", hint='e.g. {"budget": {"max_duration": "4h"}}')
    unknown = sorted(set(raw) - set(BUDGET_FIELDS))
    if unknown:
        raise bad_input(f"unknown budget field {unknown[0]!r} (fields: {', '.join(BUDGET_FIELDS)})")
    if all(raw.get(k) in (None, 0, "", "0") for k in BUDGET_FIELDS):
        return None
    values: dict[str, Any] = {}
    for key in ("max_cost_usd",):
        v = raw.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise bad_input(f"--max-cost-usd must be a finite number, got {v!r}")
        values[key] = float(v or 0.0)
    for key, flag in (("max_tokens", "--max-tokens"), ("max_iterations", "--max-iterations"),
                      ("max_parallel_branches", "--max-parallel-branches")):
        v = raw.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise bad_input(f"{flag} must be an integer, got {v!r}")
        values[key] = int(v or 0)
    duration = raw.get("max_duration")
    try:
        values["max_duration_s"] = parse_duration(duration) if duration not in (None, "") else 0.0
    except DurationError as exc:
        raise bad_input(str(exc)) from None
    try:
        return BudgetAsk(**values)
    except ValueError as exc:
        raise bad_input(f"invalid budget override: {_one_line(str(exc).splitlines()[-1] if str(exc) else str(exc))}") from None


def _doc_json(doc: RunDoc) -> dict[str, Any]:
    out = doc.model_dump(mode="json", exclude={"workflow_source", "workflow_sources"})
    return out


class Service:
    """The operations of the HTTP API over ``store``; paths in requests stay inside ``project``."""

    def __init__(self, store: Store, project: Path, *, log_dir: Path | None = None, queue: Any = None) -> None:
        self.store = store
        self.project = project.resolve()
        self.log_dir = log_dir or (store.root / "server" / "logs")
        # a WorkQueue (iterion.queue.jsqueue): launches and resumes are queued for `iterion runner`
        # instead of executing here (iterion/server/queued.py)
        self.queue = queue
        self.handshake_timeout_s = _handshake_timeout_s()

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
                           hint="GET the run again, check its status, then retry", exit_code=ErrorCode.REFUSED,
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

    def _confine_uploads(self, answers: dict[str, Any]) -> dict[str, Any]:
        """A file answer (``@path``; ``@@`` is a literal @) may only name a file inside the project."""
        out = dict(answers)
        for key, value in answers.items():
            if isinstance(value, str) and value.startswith("@") and not value.startswith("@@"):
                out[key] = "@" + str(self.confine(value[1:], f"answer {key} file"))
        return out

    @staticmethod
    def check_backend(backend: Any) -> None:
        """Refused up front, with the CLI's --backend message (a run must not start and then fail)."""
        if backend is None:
            return
        if not isinstance(backend, str):
            raise bad_input("backend must be a string")
        from iterion.backends.base import BackendError
        from iterion.backends.registry import canonical_name

        try:
            canonical_name(backend)
        except BackendError as exc:
            raise bad_input(f"--backend: {exc.message}", hint="pick one of the known backends, or drop --backend") from None

    @staticmethod
    def check_model(model: Any) -> str | None:
        """A ``model`` override refused up front with the CLI's --model message."""
        from iterion.backends.choice import check_model_override

        try:
            return check_model_override(model)
        except ValueError as exc:
            raise bad_input(f"--model: {exc}", hint="drop model to keep the workflow's models") from None

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
            "boundaries": bounds,
            "last_seq": events[-1].seq if events else 0,
            "executing": self.store.is_locked(doc.id),  # a process holds the run's lock right now
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
            raise ApiError(404, str(exc), hint=f"list them with GET /api/runs/{doc.id}", exit_code=ErrorCode.BAD_INPUT) from None
        try:
            reader = tl.StateReader(self.store, doc)
            changes = reader.changes(a["state"], b["state"])
            diff, truncated = reader.unified_diff(a["state"], b["state"])
        except tl.BoundaryNotFound as exc:
            raise ApiError(404, str(exc), exit_code=ErrorCode.BAD_INPUT) from None
        except Exception as exc:  # noqa: BLE001
            raise ApiError(409, f"cannot read the recorded states of run {doc.id}: {_one_line(str(exc))}",
                           exit_code=ErrorCode.REFUSED) from None
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

    # -- executions -----------------------------------------------------------------------------
    def _store_spec(self) -> dict[str, Any]:
        """How the worker opens this very store: the same JetStream server and prefix, or files
        ("off" so an ITERION_NATS_URL in the environment cannot send it elsewhere)."""
        docs: Any = self.store.docs
        if self.store.shared:
            return {"nats": docs.url, "nats_prefix": docs.prefix}
        return {"nats": "off"}

    def _spawn(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start a worker and wait for its handshake (iterion/server/worker.py)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{request['run_id']}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
        request = {**request, "store_dir": str(self.store.root), **self._store_spec()}
        # the server's credential never reaches the run's tools
        env = {k: v for k, v in os.environ.items() if k != "ITERION_SERVER_TOKEN"}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "iterion.server.worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, cwd=str(self.project), env=env,
                                    start_new_session=True, close_fds=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request).encode("utf-8"))
        proc.stdin.close()
        threading.Thread(target=proc.wait, daemon=True, name="iterion-reap").start()  # no zombies
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + self.handshake_timeout_s
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.stdout.close()
                return {"ok": True, "run_id": request["run_id"], "pending": True, "log": str(log_path)}
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
        proc.stdout.close()
        try:
            answer = json.loads(buf.split(b"\n", 1)[0] or b"{}")
        except ValueError:
            answer = {}
        if not answer:
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-400:].strip().splitlines()
            last = (_one_line(tail[-1]) or "") if tail else "no output"
            raise ApiError(500, f"the execution process ended without answering: {last}", exit_code=ErrorCode.INTERNAL,
                           hint=f"see {log_path}")
        answer["log"] = str(log_path)
        return answer

    def _refusal(self, answer: dict[str, Any]) -> ApiError:
        code = int(answer.get("exit_code") or ErrorCode.BAD_INPUT)
        kind = answer.get("kind")
        extra = {"diagnostics": answer["diagnostics"]} if answer.get("diagnostics") else {}
        status = 422 if code == 2 else 409
        if kind in ("RunNotFoundError",):
            status = 404
        elif kind == "InvalidWorkflow":  # the request named a workflow with errors: bad input
            status = 422
        elif kind == "StaleWriteError":
            extra["reason"] = "stale_version"
        elif code == 3:
            status = 500
        return ApiError(status, _one_line(answer.get("error")) or "refused", hint=_one_line(answer.get("hint")),
                        exit_code=code, extra=extra)

    def launch(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.queue is not None:
            from iterion.server.queued import launch_queued

            return launch_queued(self, body)
        allowed = {"file", "workspace", "vars", "preset", "backend", "model", "script", "answers", "attachments",
                   "budget", "branch_name", "merge_into", "auto_merge", "on_budget"}
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise bad_input(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(allowed))})")
        if "file" not in body:
            raise bad_input("file is required: the workflow to run", hint='e.g. {"file": "fixtures/demo/demo.bot"}')
        file = self.confine(body["file"], "file")
        if not file.exists():
            raise bad_input(f"workflow {body['file']} does not exist")
        workspace = self.confine(body.get("workspace") or str(self.project), "workspace")
        if not workspace.is_dir():
            raise bad_input(f"workspace {body.get('workspace')} is not an existing directory",
                            hint="create it first, inside the project")
        for key in ("vars", "answers", "attachments"):
            if key in body and not isinstance(body[key], dict):
                raise bad_input(f"{key} must be an object")
        raw_vars = body.get("vars") or {}
        if any(not isinstance(v, (str, int, float, bool)) for v in raw_vars.values()):
            raise bad_input("vars values must be strings, numbers or booleans")
        answers = body.get("answers") or {}
        for node, value in answers.items():
            if not isinstance(value, dict):
                raise bad_input(f"answers: {node} must map fields to values", hint='e.g. {"approve": {"approved": true}}')
        answers = {node: self._confine_uploads(value) for node, value in answers.items()}
        on_budget = body.get("on_budget") or "fail"
        if on_budget not in ("fail", "pause"):
            raise bad_input(f"on_budget must be fail or pause, got {on_budget!r}")
        for key in ("preset", "backend", "branch_name", "merge_into"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise bad_input(f"{key} must be a string")
        self.check_backend(body.get("backend"))
        script = self.check_script(body.get("script"))
        budget = budget_from_wire(body.get("budget"))
        request: dict[str, Any] = {
            "action": "launch", "run_id": new_id(), "file": str(file), "workspace": str(workspace),
            "vars": {k: v if isinstance(v, str) else json.dumps(v) for k, v in raw_vars.items()},
            "preset": body.get("preset"), "backend": body.get("backend"), "answers": answers,
            "model": self.check_model(body.get("model")), "script_file": script,
            "attachments": {str(k): str(self.confine(v, f"attachment {k}"))
                            for k, v in (body.get("attachments") or {}).items()},
            "budget": budget.model_dump(mode="json") if budget else None,
            "branch_name": body.get("branch_name"), "merge_into": body.get("merge_into"),
            "auto_merge": bool(body.get("auto_merge", True)), "on_budget": on_budget,
        }
        answer = self._spawn(request)
        if not answer.get("ok"):
            raise self._refusal(answer)
        return {"run_id": answer["run_id"], "started": True, "pending": bool(answer.get("pending")),
                "log": answer.get("log")}

    def resume(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.queue is not None:
            from iterion.server.queued import resume_queued

            return resume_queued(self, ref, body)
        allowed = {"answers", "budget", "force", "file", "backend", "model", "force_stale", "expected_version"}
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise bad_input(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(allowed))})")
        doc = self.load(ref)
        self.check_version(doc, body.get("expected_version"))
        answers = body.get("answers") or {}
        if not isinstance(answers, dict):
            raise bad_input("answers must be an object of field -> value", hint='e.g. {"approved": true}')
        answers = self._confine_uploads(answers)
        for key in ("force", "force_stale"):
            if key in body and not isinstance(body[key], bool):
                raise bad_input(f"{key} must be true or false")
        self.check_backend(body.get("backend"))
        budget = budget_from_wire(body.get("budget"))
        request = {"action": "resume", "run_id": doc.id, "answers": answers, "force": bool(body.get("force")),
                   "force_stale": bool(body.get("force_stale")), "backend": body.get("backend"),
                   "model": self.check_model(body.get("model")),
                   "file": str(self.confine(body["file"], "file")) if body.get("file") else None,
                   "budget": budget.model_dump(mode="json") if budget else None}
        answer = self._spawn(request)
        if not answer.get("ok"):
            raise self._refusal(answer)
        return {"run_id": doc.id, "resumed": True, "pending": bool(answer.get("pending")), "log": answer.get("log")}

    # -- operator verbs (in process: the engine's own functions) ----------------------------------
    def cancel(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        from iterion.engine.operator_verbs import cancel_run

        doc = self.load(ref)
        self.check_version(doc, body.get("expected_version"))
        wait = self._wait(body)
        reason = body.get("reason") or "cancelled by operator (iterion server)"
        if self.queue is not None:
            from iterion.server.queued import control_remote

            answer = control_remote(self, doc.id, "cancel", reason, wait)
            if answer is not None:
                return answer
        return self._guard(cancel_run, self.store, doc.id, wait_s=wait, reason=reason).to_json()

    def pause(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        from iterion.engine.operator_verbs import pause_run

        doc = self.load(ref)
        self.check_version(doc, body.get("expected_version"))
        wait = self._wait(body)
        reason = body.get("reason") or "paused by operator (iterion server)"
        if self.queue is not None:
            from iterion.server.queued import control_remote

            answer = control_remote(self, doc.id, "pause", reason, wait)
            if answer is not None:
                return answer
        return self._guard(pause_run, self.store, doc.id, wait_s=wait, reason=reason).to_json()

    @staticmethod
    def _wait(body: dict[str, Any]) -> float:
        wait = body.get("wait", 10)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 60:
            raise bad_input(f"wait must be a number of seconds between 0 and 60, got {wait!r}")
        return float(wait)

    def rewind(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        from iterion.rewind.files import RestoreScope
        from iterion.rewind.rewind import RewindRequest, rewind_run

        allowed = {"node", "auto", "restore_scope", "dry_run", "file", "expected_version"}
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise bad_input(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(allowed))})")
        node, auto = body.get("node"), body.get("auto", False)
        if not isinstance(auto, bool):
            raise bad_input("auto must be true or false")
        if node is not None and (not isinstance(node, str) or not node):
            raise bad_input("node must be a node name")
        if bool(node) == bool(auto):
            raise bad_input("give exactly one of --node NODE or --auto",
                            hint="--auto finds the node your edit affects; --node names it")
        scope = body.get("restore_scope")
        if scope is not None:
            try:
                scope = RestoreScope(scope)
            except ValueError:
                raise bad_input(f"restore_scope must be one of {', '.join(s.value for s in RestoreScope)}, "
                                f"got {scope!r}") from None
        dry_run = body.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise bad_input("dry_run must be true or false")
        doc = self.load(ref)
        self.check_version(doc, body.get("expected_version"))
        file = self.confine(body["file"], "file") if body.get("file") else None
        if file is None and self.queue is not None:
            from iterion.server.queued import recorded_source

            file = recorded_source(self, doc)  # a repository run's clone is gone: its recorded files
        req = RewindRequest(run_id=doc.id, node=node, auto=auto, restore_scope=scope, file=file, dry_run=dry_run)
        result = self._guard(rewind_run, self.store, req)
        return dict(result.to_json())

    def undo_rewind(self, ref: str, body: dict[str, Any]) -> dict[str, Any]:
        """``iterion rewind --undo``: the same function, so the web's "Undo this rewind" and the
        CLI put back exactly the same files and checkpoint (and refuse alike once the run moved on)."""
        from iterion.rewind.undo import undo_rewind

        unknown = sorted(set(body) - {"expected_version"})
        if unknown:
            raise bad_input(f"unknown field {unknown[0]!r} (fields: expected_version)")
        doc = self.load(ref)
        self.check_version(doc, body.get("expected_version"))
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
