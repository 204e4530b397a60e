"""One execution of a run (a launch or a resume) for the HTTP service, in its own process.

``python -m iterion.server.worker`` reads one :class:`Job` on stdin (JSON: the store to open and the
very ``LaunchRequest``/``ResumeRequest`` the server parsed, its paths made absolute), then calls
the engine's own ``launch_run`` / ``resume_run`` (the same code ``iterion run`` / ``iterion
resume`` call: the budget merge, the source-digest gate, the answer coercion all live there, once)
with the options the request gives (``iterion.requests``: the answers fitted to their shape there).

Why a detached process per execution rather than a thread of the server: the run must outlive the
server (a restart or a crash of the HTTP service never kills a run; the run's own lock and owner
record say who executes it, exactly as for a CLI run), a run's tool children and signal handling
stay in a process of their own, and two runs never share the server's interpreter state.

The handshake (the invariant the server relies on): the worker writes exactly ONE JSON line to
fd 1, then points fd 1 at /dev/null (a server that went away never breaks the run with SIGPIPE):

* ``{"ok": true, "run_id": ..., "event": "run_started"|"run_resumed"}`` as soon as the run is
  claimed (its first event), so the HTTP answer names a run that exists and executes;
* ``{"ok": false, "error": ..., "hint": ..., "exit_code": ..., "kind": ...}`` when the engine
  refused before claiming (a bad var, a changed source without force, answers that do not fit the
  gate, a busy workspace): nothing was created or changed, the HTTP answer carries the message;
* ``{"ok": true, "run_id": ..., "status": ...}`` if the execution ended before any event (never
  expected; kept so the server is always answered).

Everything else the run prints goes to the log file the server opened as stderr.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.oserror import environment_error
from iterion.requests import LaunchRequest, ResumeRequest


class Job(BaseModel):
    """What the server writes to a worker's stdin (same release on both ends: not persisted)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["launch", "resume"]
    run_id: str
    store_dir: str
    nats: str = "off"
    nats_prefix: str | None = None
    launch: LaunchRequest | None = None
    resume: ResumeRequest | None = None


class Handshake:
    """Write the one handshake line at most once (the engine may emit from several threads)."""

    def __init__(self, fd: int = 1) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self.sent = False

    def send(self, payload: dict[str, Any]) -> None:
        with self._lock:
            if self.sent:
                return
            self.sent = True
            data = (json.dumps(payload, default=str) + "\n").encode("utf-8")
            try:
                os.write(self._fd, data)
            except OSError:
                pass  # the server went away: the run goes on regardless
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)


def execute(job: Job, handshake: Handshake) -> int:
    """Run the job; returns the process exit code (0: the execution reached an end state)."""
    from iterion.engine.cancel import CancelToken
    from iterion.engine.errors import InvalidWorkflow
    from iterion.engine.launch import launch_run
    from iterion.engine.notice import is_unrecorded
    from iterion.engine.resume import resume_run
    from iterion.engine.source import compile_source
    from iterion.requests import human_nodes
    from iterion.store import Event
    from iterion.store import events as ev
    from iterion.store.opener import open_store

    store = open_store(Path(job.store_dir), nats=job.nats or "off", prefix=job.nats_prefix)
    token = CancelToken()
    started = ev.RUN_RESUMED if job.action == "resume" else ev.RUN_STARTED

    def listener(e: Event) -> None:
        if e.type == started:
            handshake.send({"ok": True, "run_id": job.run_id, "event": e.type})
        elif is_unrecorded(e):  # what the engine could not put on the timeline: to the server's log
            sys.stderr.write(f"iterion worker: {e.payload.get('message')}\n")

    try:
        if job.launch is not None:
            compiled = compile_source(Path(job.launch.file))  # flat answers go to its one human node
            options = job.launch.launch_options(human_nodes(compiled), wait_workspace=False, run_id=job.run_id)
            result = launch_run(store, Path(job.launch.file), options, token=token, listener=listener,
                                compiled=compiled)
        else:
            req = job.resume or ResumeRequest()
            options_r = req.resume_options(req.answers_for_run(store, job.run_id), wait_workspace=False)
            result = resume_run(store, job.run_id, options_r, token=token, listener=listener)
    except BaseException as exc:  # noqa: BLE001 - the one place this process turns errors into an answer
        exc = environment_error(exc) or exc
        if isinstance(exc, UserError):
            payload: dict[str, Any] = {"ok": False, "error": exc.message or str(exc), "hint": exc.hint,
                                       "exit_code": exc.exit_code, "kind": type(exc).__name__}
            if isinstance(exc, InvalidWorkflow):
                payload["diagnostics"] = [d.to_json() for d in exc.diagnostics]
        else:
            payload = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}", "hint": None,
                       "exit_code": ErrorKind.INTERNAL, "kind": type(exc).__name__}
        if handshake.sent:
            sys.stderr.write(f"iterion worker: {payload['error']}\n")
        handshake.send(payload)
        return int(payload["exit_code"])
    handshake.send({"ok": True, "run_id": result.run_id, "status": result.status.value})
    sys.stderr.write(f"iterion worker: run {result.run_id} ended {result.status.value}\n")
    return 0


def main() -> None:
    job = Job.model_validate_json(sys.stdin.read())
    sys.stdin.close()
    sys.exit(execute(job, Handshake()))


if __name__ == "__main__":
    main()
