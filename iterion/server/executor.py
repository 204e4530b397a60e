"""Who executes the server's launches and resumes: chosen once, when the Service is built.

``LocalExecutor`` (iterion/server/local.py) runs each in a detached worker process on this
machine; ``QueueExecutor`` (iterion/server/queued.py) queues it for an ``iterion runner``. The
service parses every request into its model (``iterion.requests``) with the executor's ``kind``,
so the fields only one executor takes are refused by the model's validators, and then calls the
executor: it never asks which one it has.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from iterion.requests import LaunchRequest, ResumeRequest
    from iterion.server.service import Service
    from iterion.store import RunDoc


class Executor(Protocol):
    kind: str  # iterion.requests.LOCAL or QUEUE: the validation context of the request models
    queue: Any  # the WorkQueue a queue executor publishes to (metrics read it); None when local

    def launch(self, svc: Service, req: LaunchRequest) -> dict[str, Any]:
        """Start (or queue) the run ``req`` asks for; the HTTP answer."""
        ...

    def resume(self, svc: Service, doc: RunDoc, req: ResumeRequest) -> dict[str, Any]:
        """Resume (or queue the resume of) ``doc``, whose version the service already checked."""
        ...

    def control(self, svc: Service, run_id: str, action: str, reason: str, wait_s: float) -> dict[str, Any] | None:
        """Cancel/pause where the run executes, or None: the service acts on the store itself."""
        ...

    def rewind_source(self, svc: Service, doc: RunDoc) -> Path | None:
        """The workflow file a rewind without ``file`` reads, or None: the recorded path."""
        ...

    def status(self, svc: Service) -> dict[str, Any]:
        """``GET /api/queue``."""
        ...
