"""Where ``iterion rewind --node NODE`` would go, decided cheaply and without writing: the rules
``rewind_run`` applies before it plans any file (the status table, a checkpoint, the execution
it targets, a recorded ``pre:`` boundary), in one place, so the web page offers a rewind on an
execution row only where the rewind itself would take it.

``rewind_offers`` does not compile the workflow: the caller passes it (the page has it already);
without one, fan-out promotion and the node's presence in the current source are not checked,
and the rewind's own refusal names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gitrefs.boundary import BoundaryKind
from gitrefs.errors import GitRefsError
from iterion.rewind.lent import LentVersioning, versioning_for
from iterion.rewind.promotion import promote
from iterion.rewind.state_edit import current_attempt, executed_nodes, last_execution, resolve_anchor
from iterion.store import Checkpoint, Command, RunDoc, Store, WorkspaceMode
from iterion.store.status import accepts, refusal_message
from workspacetrack.errors import TrackError

if TYPE_CHECKING:
    from iterion.ir import Workflow


def pre_iterations(store: Store, doc: RunDoc, worktree: bool,
                   lent: LentVersioning | None = None) -> dict[str, set[int]] | None:
    """node -> iterations with a recorded ``pre:`` boundary; None when the workspace's record
    cannot be read (a released worktree), so callers fall back to the checkpoint alone. A dry
    run lends its one versioning (``lent``: iterion/rewind/lent.py) instead of opening another."""
    workspace = Path(doc.workspace_dir) if doc.workspace_dir else None
    if workspace is None or not workspace.is_dir():
        return None
    try:
        with versioning_for(lent, worktree=worktree, workspace=workspace, run_dir=store.run_dir(doc.id),
                            run_id=doc.id) as versioning:
            out: dict[str, set[int]] = {}
            for entry in versioning.chain():
                if entry.label.kind is BoundaryKind.PRE:
                    out.setdefault(entry.label.node, set()).add(entry.label.iteration)
            return out
    except (GitRefsError, TrackError):
        return None


def pre_recorded(pre: dict[str, set[int]] | None, node: str, iteration: int) -> bool:
    """Whether the files anchor ``pre:<node>:<iteration>`` exists (unknown record: assumed, as
    the rewind does; a rewind restoring files is refused without it)."""
    return pre is None or iteration in pre.get(node, set())


@dataclass
class RewindOffers:
    """``refused``: why no rewind is possible at all (None when some may be); ``targets``: node ->
    (the pivot it goes to, that pivot's iteration) for every node a rewind would take; ``latest``:
    node -> the iteration of its execution the rewind goes back to (the row that offers it)."""

    refused: str | None = None
    targets: dict[str, tuple[str, int]] = field(default_factory=dict)
    latest: dict[str, int] = field(default_factory=dict)


def rewind_offers(store: Store, doc: RunDoc, cp: Checkpoint | None, wf: Workflow | None = None) -> RewindOffers:
    if not accepts(Command.REWIND, doc.status):
        return RewindOffers(refused=refusal_message(Command.REWIND, doc.id, doc.status))
    if cp is None:
        return RewindOffers(refused=f"run {doc.id} has no checkpoint - nothing to rewind")
    pre = pre_iterations(store, doc, doc.workspace_mode is WorkspaceMode.WORKTREE)
    attempt = current_attempt(cp, pre)
    out = RewindOffers()
    for node in dict.fromkeys(executed_nodes(cp) + ([attempt.node] if attempt is not None else [])):
        pivot = node
        if wf is not None:
            if node not in wf.nodes:
                continue  # gone from the workflow on disk: the rewind names it unknown
            pivot = promote(wf, node).pivot
        target = resolve_anchor(cp, pivot, attempt, pre)
        if target is None or not pre_recorded(pre, pivot, target.iteration):
            continue
        own = attempt.iteration if attempt is not None and attempt.node == node else None
        if own is None:
            last = last_execution(cp, node)
            own = target.iteration if last is None else last[1]
        out.targets[node] = (pivot, target.iteration)
        out.latest[node] = own
    return out
