"""The server's executor without a queue: each launch or resume runs in a detached worker process.

The request's paths are confined to the project and made absolute here (the worker runs them as
given), then the same model is written to the worker's stdin (iterion/server/worker.py says why a
process, and what its one handshake line means). Cancel and pause act on the store (the engine's
own functions, called by the service).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrefs.persist.errors import ErrorKind
from iterion.requests import LOCAL, LaunchRequest, ResumeRequest
from iterion.server.apierror import ApiError, _one_line, bad_input
from iterion.server.worker import Job
from iterion.store.ids import new_id

if TYPE_CHECKING:
    from iterion.server.service import Service
    from iterion.store import RunDoc


class LocalExecutor:
    kind = LOCAL
    queue: Any = None

    def launch(self, svc: Service, req: LaunchRequest) -> dict[str, Any]:
        file = svc.confine(req.file, "file")
        if not file.exists():
            raise bad_input(f"workflow {req.file} does not exist")
        workspace = svc.confine(req.workspace or str(svc.project), "workspace")
        if not workspace.is_dir():
            raise bad_input(f"workspace {req.workspace} is not an existing directory",
                            hint="create it first, inside the project")
        confined = req.model_copy(update={
            "file": str(file), "workspace": str(workspace), "script": svc.check_script(req.script),
            "answers": svc.confine_answers(req.answers),
            "attachments": {str(k): str(svc.confine(v, f"attachment {k}")) for k, v in (req.attachments or {}).items()},
        })
        answer = self._spawn(svc, Job(action="launch", run_id=new_id(), launch=confined, **svc.store_spec()))
        if not answer.get("ok"):
            raise refusal(answer)
        return {"run_id": answer["run_id"], "started": True, "pending": bool(answer.get("pending")),
                "log": answer.get("log")}

    def resume(self, svc: Service, doc: RunDoc, req: ResumeRequest) -> dict[str, Any]:
        confined = req.model_copy(update={
            "answers": svc.confine_answers(req.answers),
            "file": str(svc.confine(req.file, "file")) if req.file else None})
        answer = self._spawn(svc, Job(action="resume", run_id=doc.id, resume=confined, **svc.store_spec()))
        if not answer.get("ok"):
            raise refusal(answer)
        return {"run_id": doc.id, "resumed": True, "pending": bool(answer.get("pending")), "log": answer.get("log")}

    def control(self, svc: Service, run_id: str, action: str, reason: str, wait_s: float) -> dict[str, Any] | None:
        return None  # the run executes on this machine: the engine's own functions act on the store

    def rewind_source(self, svc: Service, doc: RunDoc) -> Path | None:
        return None

    def status(self, svc: Service) -> dict[str, Any]:
        raise ApiError(404, "this server has no queue", hint="start it with `iterion server --nats URL`",
                       exit_code=ErrorKind.BAD_INPUT)

    @staticmethod
    def _spawn(svc: Service, job: Job) -> dict[str, Any]:
        """Start a worker and wait for its handshake (iterion/server/worker.py)."""
        svc.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = svc.log_dir / f"{job.run_id}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
        # the server's credential never reaches the run's tools
        env = {k: v for k, v in os.environ.items() if k != "ITERION_SERVER_TOKEN"}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "iterion.server.worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, cwd=str(svc.project), env=env,
                                    start_new_session=True, close_fds=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(job.model_dump_json().encode("utf-8"))
        proc.stdin.close()
        threading.Thread(target=proc.wait, daemon=True, name="iterion-reap").start()  # no zombies
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + svc.handshake_timeout_s
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.stdout.close()
                return {"ok": True, "run_id": job.run_id, "pending": True, "log": str(log_path)}
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
            raise ApiError(500, f"the execution process ended without answering: {last}", exit_code=ErrorKind.INTERNAL,
                           hint=f"see {log_path}")
        answer["log"] = str(log_path)
        return dict(answer)


def refusal(answer: dict[str, Any]) -> ApiError:
    """The worker's refusal (its handshake line) as the HTTP answer."""
    code = int(answer.get("exit_code") or ErrorKind.BAD_INPUT)
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
