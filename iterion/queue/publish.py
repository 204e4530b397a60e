"""Queueing a launch or a resume: what the HTTP service does with a queue configured.

A launch first creates the run's document with status ``queued`` (so the run exists, is listed
and can be cancelled or rewound while no runner has it), then publishes the delivery. The order
is the invariant: a delivery never names a run the store does not have (a runner terminates one
that does; "unknown run"). A resume publishes a delivery for the existing run (its status stays
what it is until a runner claims it). Both are deduplicated by the delivery's message id.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from iterion.queue.delivery import Delivery, Kind
from iterion.queue.jsqueue import WorkQueue
from iterion.store import RunDoc, RunStatus, Store
from iterion.store.ids import friendly_name, new_id

QUEUE_OPTION = "queue"  # the run document's options key: where the run is queued from


def queue_launch(store: Store, queue: WorkQueue, *, request_id: str, file: str, run_id: str | None = None,
                 repo_url: str | None = None, ref: str | None = None, workspace: str | None = None,
                 **fields: Any) -> tuple[RunDoc, dict[str, Any]]:
    """Create the queued run and publish its launch delivery; (document, publish answer)."""
    run_id = run_id or new_id()
    stem = PurePosixPath(file).name.split(".")[0] or "run"
    doc = RunDoc(id=run_id, name=friendly_name(stem, store.run_names()), status=RunStatus.QUEUED,
                 workflow_name=stem, file_path=file if repo_url is None else None,
                 workspace_dir=workspace or "",
                 options={QUEUE_OPTION: {"repo_url": repo_url, "ref": ref, "file": file}})
    delivery = Delivery(kind=Kind.LAUNCH, run_id=run_id, request_id=request_id, repo_url=repo_url, ref=ref,
                        file=file, workspace=workspace, **fields)
    store.create_run(doc)
    return doc, queue.publish(delivery)


def queue_resume(store: Store, queue: WorkQueue, run_id: str, *, request_id: str,
                 **fields: Any) -> dict[str, Any]:
    """Publish a resume delivery for ``run_id`` (bound to the repository its launch named)."""
    doc = store.load_run(run_id)
    where = doc.options.get(QUEUE_OPTION) or {}
    delivery = Delivery(kind=Kind.RESUME, run_id=run_id, request_id=request_id, repo_url=where.get("repo_url"),
                        ref=where.get("ref"), file=where.get("file") if where.get("repo_url") else None,
                        workspace=None, **fields)
    return queue.publish(delivery)
