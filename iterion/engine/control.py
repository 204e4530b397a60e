"""Operator requests to a run (``iterion cancel`` and ``iterion pause``): the request document
and the executing process's side. The verbs themselves (``cancel_run``, ``pause_run``) are in
``iterion.engine.operator_verbs``, above the engine's execution modules they need.

A request is a small document, ``runs/<run>/control.json``, that the process executing the run
picks up: a watcher thread turns a cancel into the run's CancelToken (so a running tool is killed
at once and the cancel anchors at the node that was executing), and the main loop checks for a
pause at every node boundary (so the run parks ``paused_operator`` anchored at the node about to
execute, with nothing interrupted). A file rather than a signal: it needs no pid, works for any
process that owns the run, and leaves an audit trail in the request itself.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from gitrefs.persist import VersionedModel, read_model, write_model
from iterion.engine.cancel import CancelToken
from iterion.engine.errors import OperatorPause
from iterion.engine.stop import Emit, Lost, Stop, stop_run
from iterion.store import AnchorReason, RunStatus, Store
from iterion.store import events as ev
from iterion.store.timeutil import utcnow

if TYPE_CHECKING:
    from iterion.engine.context import ExecContext
    from iterion.engine.result import RunResult
    from iterion.engine.stop import StopHost

CONTROL_FILE = "control.json"
POLL_S = 0.1  # how often the executing process looks for a request


class Action(StrEnum):
    CANCEL = "cancel"
    PAUSE = "pause"


class ControlRequest(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    action: Action
    reason: str
    requested_at: datetime = Field(default_factory=utcnow)
    pid: int = Field(default_factory=os.getpid)
    host: str = Field(default_factory=socket.gethostname)


# -- the request document -----------------------------------------------------------------------
def _path(store: Store, run_id: str) -> Any:
    return store.run_dir(run_id) / CONTROL_FILE


def write_request(store: Store, run_id: str, action: Action, reason: str) -> ControlRequest:
    request = ControlRequest(action=action, reason=reason)
    write_model(_path(store, run_id), request)
    return request


def read_request(store: Store, run_id: str) -> ControlRequest | None:
    path = _path(store, run_id)
    try:
        return read_model(path, ControlRequest)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a torn or foreign file is no request; the next write replaces it
        return None


def clear_request(store: Store, run_id: str) -> None:
    try:
        _path(store, run_id).unlink()
    except FileNotFoundError:
        pass


# -- the executing side ---------------------------------------------------------------------------
@contextmanager
def watch_control(store: Store, run_id: str, token: CancelToken, *, poll_s: float = POLL_S) -> Iterator[None]:
    """While the block executes the run, a cancel request cancels ``token``.

    A request older than this execution's claim (the run document's owner record) is not for it:
    it is cleared first. One made since the claim (an operator quick off the mark) is kept.
    """
    _clear_older_than_claim(store, run_id)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(poll_s):
            req = read_request(store, run_id)
            if req is not None and req.action is Action.CANCEL:
                token.cancel(req.reason)
                return

    thread = threading.Thread(target=loop, name=f"iterion-control-{run_id[:8]}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
        clear_request(store, run_id)


def _clear_older_than_claim(store: Store, run_id: str) -> None:
    req = read_request(store, run_id)
    if req is None:
        return
    try:
        owner = store.load_run(run_id).owner
    except Exception:  # noqa: BLE001 - no readable claim: treat the request as stale
        owner = None
    if owner is None or req.requested_at < owner.started:
        clear_request(store, run_id)


def pause_point(ctx: ExecContext) -> None:
    """Called at each node boundary of the main loop: raise OperatorPause if one was requested."""
    req = read_request(ctx.store, ctx.run_id)
    if req is not None and req.action is Action.PAUSE:
        raise OperatorPause(req.reason)


def park_operator(host: StopHost, exc: OperatorPause) -> RunResult:
    """Park ``paused_operator`` anchored at the node about to execute (nothing was interrupted),
    at the iteration it was about to run; ``control.json`` goes after the checkpoint."""
    ctx, st = host.ctx, host.ctx.state
    restart, it = st.next_node, st.next_iteration

    def clear() -> dict[str, Any]:
        clear_request(ctx.store, ctx.run_id)
        return {}

    return stop_run(host, Stop(
        RunStatus.PAUSED_OPERATOR, anchor=AnchorReason.OPERATOR_PAUSE, restart=restart, iteration=it,
        lost=Lost(None, f"the run was paused by an operator ({exc.reason})"),
        finalize=clear,
        events=lambda _: [Emit(ev.RUN_PAUSED, restart, it, {"reason": exc.reason, "by": "operator",
                                                            "restart_node": restart})]))
