"""One execution of a run (a launch or a resume) for the HTTP service, in its own process.

``python -m iterion.server.worker`` reads one JSON request on stdin, then calls the engine's own
``launch_run`` / ``resume_run`` (the same code ``iterion run`` / ``iterion resume`` call: the
budget merge, the source-digest gate, the answer coercion all live there, once).

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
from typing import Any

from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorCode
from gitrefs.persist.oserror import environment_error
from iterion.budget import BudgetAsk
from iterion.engine.cancel import CancelToken
from iterion.engine.errors import InvalidWorkflow
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.notice import is_unrecorded
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.store import Event
from iterion.store import events as ev
from iterion.store.opener import open_store


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


def _budget(raw: dict[str, Any] | None) -> BudgetAsk | None:
    return BudgetAsk.model_validate(raw) if raw else None


def execute(request: dict[str, Any], handshake: Handshake) -> int:
    """Run the request; returns the process exit code (0: the execution reached an end state)."""
    store = open_store(Path(request["store_dir"]), nats=request.get("nats") or "off",
                       prefix=request.get("nats_prefix"))
    token = CancelToken()
    started = ev.RUN_RESUMED if request["action"] == "resume" else ev.RUN_STARTED

    def listener(e: Event) -> None:
        if e.type == started:
            handshake.send({"ok": True, "run_id": request["run_id"], "event": e.type})
        elif is_unrecorded(e):  # what the engine could not put on the timeline: to the server's log
            sys.stderr.write(f"iterion worker: {e.payload.get('message')}\n")

    try:
        if request["action"] == "launch":
            options = LaunchOptions(
                vars=dict(request.get("vars") or {}), preset=request.get("preset"), backend=request.get("backend"),
                model=request.get("model"),
                script_file=request.get("script_file"), answers=dict(request.get("answers") or {}),
                workspace=Path(request["workspace"]), branch_name=request.get("branch_name"),
                merge_into=request.get("merge_into"), auto_merge=bool(request.get("auto_merge", True)),
                on_budget=request.get("on_budget") or "fail", wait_workspace=False, run_id=request["run_id"],
                attachments={k: Path(v) for k, v in (request.get("attachments") or {}).items()},
                budget=_budget(request.get("budget")))
            result = launch_run(store, Path(request["file"]), options, token=token, listener=listener)
        else:
            options_r = ResumeOptions(
                answers=dict(request.get("answers") or {}),
                file=Path(request["file"]) if request.get("file") else None, force=bool(request.get("force")),
                backend=request.get("backend"), model=request.get("model"),
                force_stale=bool(request.get("force_stale")),
                wait_workspace=False, budget=_budget(request.get("budget")))
            result = resume_run(store, request["run_id"], options_r, token=token, listener=listener)
    except BaseException as exc:  # noqa: BLE001 - the one place this process turns errors into an answer
        exc = environment_error(exc) or exc
        if isinstance(exc, UserError):
            payload: dict[str, Any] = {"ok": False, "error": exc.message or str(exc), "hint": exc.hint,
                                       "exit_code": exc.exit_code, "kind": type(exc).__name__}
            if isinstance(exc, InvalidWorkflow):
                payload["diagnostics"] = [d.to_json() for d in exc.diagnostics]
        else:
            payload = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}", "hint": None,
                       "exit_code": ErrorCode.INTERNAL, "kind": type(exc).__name__}
        if handshake.sent:
            sys.stderr.write(f"iterion worker: {payload['error']}\n")
        handshake.send(payload)
        return int(payload["exit_code"])
    handshake.send({"ok": True, "run_id": result.run_id, "status": result.status.value})
    sys.stderr.write(f"iterion worker: run {result.run_id} ended {result.status.value}\n")
    return 0


def main() -> None:
    request = json.loads(sys.stdin.read())
    sys.stdin.close()
    sys.exit(execute(request, Handshake()))


if __name__ == "__main__":
    main()
