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

from gitrefs.persist.errors import ErrorKind
from iterion.queue.delivery import Delivery
from iterion.requests import QUEUE, LaunchRequest, ResumeRequest
from iterion.server.apierror import ApiError, bad_input
from iterion.store import Command, RunStatus, check_command
from iterion.store.ids import new_id

if TYPE_CHECKING:
    from iterion.server.service import Service
    from iterion.store import RunDoc


class QueueExecutor:
    """Launches and resumes become deliveries for ``iterion runner`` (the module doc)."""

    kind = QUEUE

    def __init__(self, queue: Any) -> None:
        self.queue = queue  # a WorkQueue (iterion.queue.jsqueue)

    def launch(self, svc: Service, req: LaunchRequest) -> dict[str, Any]:
        from iterion.queue.publish import queue_launch

        file, workspace = req.file, None
        if req.repo_url is None:  # a file on this machine: only runners that see this filesystem can run it
            path = svc.confine(file, "file")
            if not path.exists():
                raise bad_input(f"workflow {file} does not exist")
            ws = svc.confine(req.workspace or str(svc.project), "workspace")
            if not ws.is_dir():
                raise bad_input(f"workspace {req.workspace} is not an existing directory")
            file, workspace = str(path), str(ws)
        request_id = req.request_id or new_id()
        run_id = new_id()
        if req.request_id is not None:  # an idempotency key: the same request, the same run
            earlier = svc._guard(self.queue.claim_request, request_id, run_id)
            if earlier is not None:
                doc = svc.load(earlier)
                return {"run_id": doc.id, "name": doc.name, "status": doc.status.value, "queued": True,
                        "started": False, "duplicate": True}
        placed = req.model_copy(update={"file": file, "workspace": workspace})
        doc, published = svc._guard(queue_launch, svc.store, self.queue, request_id=request_id, run_id=run_id,
                                    **Delivery.launch_fields(placed))
        return {"run_id": doc.id, "name": doc.name, "status": RunStatus.QUEUED.value, "queued": True,
                "started": False, "msg_id": published["msg_id"], "duplicate": published["duplicate"]}

    def resume(self, svc: Service, doc: RunDoc, req: ResumeRequest) -> dict[str, Any]:
        from iterion.queue.publish import queue_resume

        svc._guard(check_command, Command.RESUME, doc.id, doc.status)  # refused at once, as without a queue
        req.answers_for_run(svc.store, doc.id)  # answers that fit no shape: refused now, not by the runner
        published = svc._guard(queue_resume, svc.store, self.queue, doc.id, request_id=req.request_id or new_id(),
                               expected_version=doc.version, **Delivery.resume_fields(req))
        return {"run_id": doc.id, "resumed": False, "queued": True, "msg_id": published["msg_id"],
                "duplicate": published["duplicate"]}

    def control(self, svc: Service, run_id: str, action: str, reason: str, wait_s: float) -> dict[str, Any] | None:
        """Cancel/pause a run a runner holds, over its control subject; None when no runner holds it
        (the service then acts here, on the store)."""
        holder = svc._guard(self.queue.lease_holder, run_id)
        if holder is None:
            return None
        doc = svc.store.load_run(run_id)
        check_command(Command.CANCEL if action == "cancel" else Command.PAUSE, run_id, doc.status) \
            if doc.status is not RunStatus.RUNNING else None
        if not svc._guard(self.queue.send_control, run_id, action, reason):
            raise ApiError(503, f"run {run_id} is held by runner {holder.get('runner')} on {holder.get('host')}, "
                                "which did not answer the request", hint="retry in a moment", exit_code=ErrorKind.BAD_INPUT)
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

    def rewind_source(self, svc: Service, doc: RunDoc) -> Path | None:
        return recorded_source(svc, doc)  # a repository run's clone is gone: its recorded files

    def status(self, svc: Service) -> dict[str, Any]:
        return dict(svc._guard(self.queue.status))


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
