"""``iterion fork --run-id R --node N``: a new child run from a recorded turn checkpoint.

Before an LLM node (agent, judge, llm router) executes in the main loop, the engine records a
TURN checkpoint, ``runs/<run>/turns/<node>/<iteration>.json``: the full execution state with the
node about to run. A fork copies one of them into a NEW run (new id, lineage recorded in its
options as ``forked_from``), parked ``paused_operator`` so ``iterion resume`` continues it from
that node. The original run is not touched: not its document, checkpoint, events or files.

Only LLM nodes have turn checkpoints (docs/user-guide.md "Cancel, pause, fork": the anchor
is a turn checkpoint, so LLM nodes only); ``iterion rewind`` is the tool for any other node. The child
re-invokes the node with a fresh conversation (its pending question and backend session are
dropped): an alternative future, not a continuation of the parent's dialogue.
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitrefs.persist import read_model, write_model
from gitrefs.persist.errors import ErrorKind
from iterion.engine.errors import EngineError
from iterion.engine.state import to_checkpoint
from iterion.store import AnchorReason, Checkpoint, RunDoc, RunStatus, Store, WorkspaceMode
from iterion.store.ids import friendly_name, new_id
from iterion.store.status import Command, accepts
from iterion.store.timeutil import utcnow

if TYPE_CHECKING:
    from iterion.engine.context import ExecContext
    from iterion.ir import Node

TURNS_DIR = "turns"
RUN_FORKED = "run_forked"  # the child's first event: {parent_run_id, node, iteration}


def _turn_path(store: Store, run_id: str, node: str, iteration: int) -> Any:
    return store.run_dir(run_id) / TURNS_DIR / node / f"{iteration}.json"


def record_turn(ctx: ExecContext, node: Node, iteration: int) -> None:
    """Runner hook, before an LLM node of the main loop executes (best effort: a lost turn
    checkpoint only means that turn cannot be forked; it never fails the run)."""
    if not node.is_llm:
        return
    try:
        from iterion.builtins.vault import scrub_model  # the PII vault's raw values stay in the vault

        cp = scrub_model(ctx.run_dir, to_checkpoint(ctx.state, usage=ctx.budget.usage(),
                                                    anchor=AnchorReason.NODE_BOUNDARY, restart_node=node.id,
                                                    restart_iteration=iteration))
        cp.run_id = ctx.run_id
        cp.written_at = utcnow()
        write_model(_turn_path(ctx.store, ctx.run_id, node.id, iteration), cp)
    except Exception as exc:  # noqa: BLE001 - see docstring
        ctx.emit("warning", node.id, iteration, {"message": f"turn checkpoint not recorded: {exc}"})


def list_turns(store: Store, run_id: str) -> dict[str, list[int]]:
    """node id -> the iterations that have a turn checkpoint, ascending."""
    root = store.run_dir(run_id) / TURNS_DIR
    out: dict[str, list[int]] = {}
    if not root.is_dir():
        return out
    for node_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        its = sorted(int(p.stem) for p in node_dir.glob("*.json") if p.stem.isdigit())
        if its:
            out[node_dir.name] = its
    return out


@dataclass
class ForkResult:
    run_id: str
    name: str
    parent_run_id: str
    node: str
    iteration: int
    status: str

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "parent_run_id": self.parent_run_id, "node": self.node,
                "iteration": self.iteration, "status": self.status}


def _copy_artifacts(store: Store, parent: str, child: str, counts: dict[str, int]) -> None:
    """The child sees the artifact versions the turn had (later ones are the parent's future)."""
    src, dst = store.artifacts(parent), store.artifacts(child)
    for name, upto in counts.items():
        for version in src.versions(name):
            if version <= upto:
                target = dst._dir(name)
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src._dir(name) / f"{version}.json", target / f"{version}.json")


def _copy_attachments(store: Store, parent: str, child: str) -> None:
    attachments = store.attachments(child)
    for record in store.attachments(parent).list():
        attachments.stage(record.name, Path(record.path), mime=record.mime)


def fork_run(store: Store, run_id: str, node: str, *, iteration: int | None = None) -> ForkResult:
    parent_id = store.resolve_run(run_id)
    parent = store.load_run(parent_id)
    turns = list_turns(store, parent_id)
    if node not in turns:
        known = ", ".join(sorted(turns)) or "none (it executed no LLM node yet)"
        cp = store.load_checkpoint(parent_id)
        executed = {e.node for e in cp.executed} if cp else set()
        if node not in executed:  # a typo or a node the run never reached: bad input
            raise EngineError(f"run {parent_id} never executed a node {node!r}; it can be forked from: {known}",
                              hint="fork needs an LLM node the run executed (agent, judge, llm router), e.g. "
                                   f"--node {min(turns) if turns else 'NODE'}", exit_code=ErrorKind.BAD_INPUT)
        # rewind is offered only where it would be accepted (never for a finished run)
        replay = (f"; to replay from any other node use `iterion rewind --run-id {parent_id} --node {node}`"
                  if accepts(Command.REWIND, parent.status) else "")
        raise EngineError(f"run {parent_id} has no turn checkpoint for node {node}; it can be forked from: {known}",
                          hint=f"fork needs an LLM node the run executed (agent, judge, llm router){replay}",
                          exit_code=ErrorKind.REFUSED)
    its = turns[node]
    chosen = its[-1] if iteration is None else iteration
    if chosen not in its:
        raise EngineError(f"node {node} of run {parent_id} has no turn checkpoint for iteration {chosen} "
                          f"(recorded: {', '.join(map(str, its))})", exit_code=ErrorKind.REFUSED)
    if parent.workspace_mode is WorkspaceMode.WORKTREE:
        raise EngineError(f"run {parent_id} runs in a worktree; forking a worktree run is not supported yet",
                          hint=f"use `iterion rewind --run-id {parent_id} --node {node}` to replay it in place",
                          exit_code=ErrorKind.REFUSED)
    cp = read_model(_turn_path(store, parent_id, node, chosen), Checkpoint)
    # an alternative future: the node is re-invoked from scratch, not mid-dialogue
    cp.pending_interaction = None
    cp.backend_sessions.pop(node, None)
    cp.recovery_pause, cp.recovery_code = False, None

    child_id = new_id()
    child = RunDoc.model_validate(parent.model_dump())
    child.id = child_id
    child.name = friendly_name(parent.workflow_name, store.run_names())
    child.status = RunStatus.PAUSED_OPERATOR  # ready at the fork point, not abandoned
    child.failure_code = child.error = None
    child.finished_at = None
    child.owner = None
    child.subbot_children = {}
    child.explicit_resume_required = False
    child.options = {**parent.options, "forked_from": {"run_id": parent_id, "node": node, "iteration": chosen}}
    store.create_run(child)
    _copy_artifacts(store, parent_id, child_id, cp.artifact_versions)
    _copy_attachments(store, parent_id, child_id)
    cp.anchor_reason = AnchorReason.OPERATOR_PAUSE
    store.save_checkpoint(child_id, cp)
    store.events(child_id).append(RUN_FORKED, node=node, iteration=chosen, payload={
        "parent_run_id": parent_id, "node": node, "iteration": chosen, "restart_node": node,
        "pid": os.getpid(), "host": socket.gethostname()})
    return ForkResult(child_id, child.name, parent_id, node, chosen, child.status.value)
