"""The HTTP service with a queue configured (``iterion server --nats URL``).

Launches and resumes are not executed by the server: they become deliveries on the work queue
(``iterion.queue``) that an ``iterion runner`` claims. A launch creates the run at once, status
``queued``, and answers its id; a resume answers 202 once the delivery is stored. Cancel and
pause of a run a runner executes travel over the run's control subject to that runner; a run no
runner holds (queued, parked) is handled by the engine's own functions here, as without a queue.

Dedup: the delivery's message id is derived from the run and the request: ``request_id`` in the
body (a client's idempotency key: the same request retried is stored once), else a fresh one.
A resume delivery also records the run's version at request time: two resume requests racing
for one run (through two servers) carry the same version, and a runner drops the one that finds
the run moved on (``run_delivery_dropped {reason: stale_request}``), so exactly one executes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from gitrefs.persist.errors import ErrorCode
from iterion.store import Command, RunStatus, check_command
from iterion.store.ids import new_id

if TYPE_CHECKING:
    from iterion.server.service import Service

LAUNCH_FIELDS = {"file", "workspace", "vars", "preset", "backend", "model", "script", "answers", "budget", "on_budget",
                 "repo_url", "ref", "request_id"}
RESUME_FIELDS = {"answers", "budget", "force", "backend", "model", "expected_version", "request_id"}


def _request_id(svc: Service, body: dict[str, Any]) -> str:
    from iterion.server.service import bad_input

    rid = body.get("request_id")
    if rid is None:
        return new_id()
    if not isinstance(rid, str) or not 1 <= len(rid) <= 200:
        raise bad_input("request_id must be a string of 1-200 characters (an idempotency key)")
    return rid


def launch_queued(svc: Service, body: dict[str, Any]) -> dict[str, Any]:
    from iterion.queue.publish import queue_launch
    from iterion.server.service import bad_input, budget_from_wire

    unknown = sorted(set(body) - LAUNCH_FIELDS)
    if unknown:
        raise bad_input(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(LAUNCH_FIELDS))})")
    file = body.get("file")
    if not isinstance(file, str) or not file:
        raise bad_input("file is required: the workflow to run", hint='e.g. {"file": "flows/main.bot"}')
    repo_url, ref = body.get("repo_url"), body.get("ref")
    for key, value in (("repo_url", repo_url), ("ref", ref)):
        if value is not None and (not isinstance(value, str) or not value or "\0" in value or "\n" in value):
            raise bad_input(f"{key} must be a non-empty one-line string")
    if ref is not None and repo_url is None:
        raise bad_input("ref needs repo_url: the ref of which repository?")
    workspace = None
    if repo_url is None:  # a file on this machine: only runners that see this filesystem can run it
        path = svc.confine(file, "file")
        if not path.exists():
            raise bad_input(f"workflow {file} does not exist")
        ws = svc.confine(body.get("workspace") or str(svc.project), "workspace")
        if not ws.is_dir():
            raise bad_input(f"workspace {body.get('workspace')} is not an existing directory")
        file, workspace = str(path), str(ws)
    else:
        if file.startswith("/") or ".." in file.split("/"):
            raise bad_input(f"file {file!r} must be a relative path inside the repository",
                            hint="e.g. --file flows/main.bot")
        if body.get("workspace") is not None:
            raise bad_input("workspace does not apply to a repository run: it executes in a fresh clone")
    raw_vars = body.get("vars") or {}
    if not isinstance(raw_vars, dict) or any(not isinstance(v, (str, int, float, bool)) for v in raw_vars.values()):
        raise bad_input("vars must be an object of strings, numbers or booleans")
    answers = body.get("answers") or {}
    if not isinstance(answers, dict):
        raise bad_input("answers must be an object")
    on_budget = body.get("on_budget") or "fail"
    if on_budget not in ("fail", "pause"):
        raise bad_input(f"on_budget must be fail or pause, got {on_budget!r}")
    svc.check_backend(body.get("backend"))
    budget = budget_from_wire(body.get("budget"))
    import json

    fields: dict[str, Any] = {
        "vars": {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in raw_vars.items()},
        "preset": body.get("preset"), "backend": body.get("backend"), "answers": answers,
        "model": svc.check_model(body.get("model")), "script_file": body.get("script"), "budget": budget.model_dump(mode="json") if budget else None,
        "on_budget": on_budget}
    request_id = _request_id(svc, body)
    run_id = new_id()
    if body.get("request_id") is not None:  # an idempotency key: the same request, the same run
        earlier = svc._guard(svc.queue.claim_request, request_id, run_id)
        if earlier is not None:
            doc = svc.load(earlier)
            return {"run_id": doc.id, "name": doc.name, "status": doc.status.value, "queued": True,
                    "started": False, "duplicate": True}
    doc, published = svc._guard(queue_launch, svc.store, svc.queue, request_id=request_id, file=file,
                                run_id=run_id, repo_url=repo_url, ref=ref, workspace=workspace, **fields)
    return {"run_id": doc.id, "name": doc.name, "status": RunStatus.QUEUED.value, "queued": True,
            "started": False, "msg_id": published["msg_id"], "duplicate": published["duplicate"]}


def resume_queued(svc: Service, ref: str, body: dict[str, Any]) -> dict[str, Any]:
    from iterion.queue.publish import queue_resume
    from iterion.server.service import bad_input, budget_from_wire

    unknown = sorted(set(body) - RESUME_FIELDS)
    if unknown:
        raise bad_input(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(RESUME_FIELDS))})")
    doc = svc.load(ref)
    svc.check_version(doc, body.get("expected_version"))
    svc._guard(check_command, Command.RESUME, doc.id, doc.status)  # refused at once, as without a queue
    answers = body.get("answers") or {}
    if not isinstance(answers, dict):
        raise bad_input("answers must be an object of field -> value", hint='e.g. {"approved": true}')
    if "force" in body and not isinstance(body["force"], bool):
        raise bad_input("force must be true or false")
    svc.check_backend(body.get("backend"))
    model = svc.check_model(body.get("model"))
    budget = budget_from_wire(body.get("budget"))
    published = svc._guard(queue_resume, svc.store, svc.queue, doc.id, request_id=_request_id(svc, body),
                           answers=answers, force=bool(body.get("force")), backend=body.get("backend"), model=model,
                           budget=budget.model_dump(mode="json") if budget else None,
                           expected_version=doc.version)
    return {"run_id": doc.id, "resumed": False, "queued": True, "msg_id": published["msg_id"],
            "duplicate": published["duplicate"]}


def control_remote(svc: Service, run_id: str, action: str, reason: str, wait_s: float) -> dict[str, Any] | None:
    """Cancel/pause a run a runner holds, over its control subject; None when no runner holds it
    (the caller then acts here, on the store)."""
    from iterion.server.service import ApiError

    holder = svc._guard(svc.queue.lease_holder, run_id)
    if holder is None:
        return None
    doc = svc.store.load_run(run_id)
    check_command(Command.CANCEL if action == "cancel" else Command.PAUSE, run_id, doc.status) \
        if doc.status is not RunStatus.RUNNING else None
    if not svc._guard(svc.queue.send_control, run_id, action, reason):
        raise ApiError(503, f"run {run_id} is held by runner {holder.get('runner')} on {holder.get('host')}, "
                            "which did not answer the request", hint="retry in a moment", exit_code=ErrorCode.BAD_INPUT)
    deadline = time.monotonic() + wait_s
    status = doc.status
    while time.monotonic() < deadline:
        status = svc.store.load_run(run_id).status
        if status is not RunStatus.RUNNING:
            break
        time.sleep(0.1)
    delivered = "requested" if status is not RunStatus.RUNNING else "pending"
    return {"run_id": run_id, "action": action, "status": status.value, "delivered": delivered,
            "restart_node": None, "runner": holder.get("runner"),
            "message": "" if delivered == "requested" else f"requested; the run did not stop within {wait_s:g}s"}


def queue_status(svc: Service) -> dict[str, Any]:
    from iterion.server.service import ApiError

    if svc.queue is None:
        raise ApiError(404, "this server has no queue", hint="start it with `iterion server --nats URL`",
                       exit_code=ErrorCode.BAD_INPUT)
    return dict(svc._guard(svc.queue.status))


def recorded_source(svc: Service, doc: Any) -> Path | None:
    """For a rewind of a repository-bound run: its workflow files as recorded on the run document,
    written under the server's store (the runner's clone is gone once the run returned). None when
    the run is not repository-bound or its recorded file still exists."""
    where = doc.options.get("queue") or {}
    if not where.get("repo_url") or not doc.workflow_source:
        return None
    if doc.file_path and Path(doc.file_path).exists():
        return None
    dest = svc.store.root / "server" / "sources" / doc.id
    shutil.rmtree(dest, ignore_errors=True)
    main_name = PurePosixPath(str(where.get("file") or "main.bot")).name
    main_key = None
    for key, text in (doc.workflow_sources or {}).items():
        rel = PurePosixPath(key)
        if rel.is_absolute() or ".." in rel.parts:
            continue  # never write outside the directory
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        if main_key is None and rel.name == main_name and text == doc.workflow_source:
            main_key = key
    if main_key is None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / main_name).write_text(doc.workflow_source, encoding="utf-8")
        return dest / main_name
    return dest / main_key
