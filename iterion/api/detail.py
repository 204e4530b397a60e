"""One run in detail (``iterion.inspect``, ``iterion inspect --run-id R``): the store's documents
read once into the plain data ``Run.detail`` holds, the fields of ``iterion inspect --json``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iterion.store import RunDoc, Store
    from iterion.store.checkpoint import Checkpoint


def boundaries_and_rewinds(store: Store, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's boundaries and its rewinds (to which node, when), from one read of its events."""
    from iterion.store import events as ev

    boundaries, rewinds = [], []
    for e in store.read_events(run_id):
        if e.type == ev.BOUNDARY_WRITTEN:
            p = ev.payload(e, ev.BoundaryWrittenPayload)
            boundaries.append({"label": p.get("label"), "state": p.get("state"), "seq": e.seq})
        elif e.type == ev.RUN_REWOUND:
            rewinds.append({"to_node": e.node, "iteration": e.iteration, "time": e.time.isoformat(), "seq": e.seq})
    return boundaries, rewinds


def timing(doc: RunDoc) -> dict[str, Any]:
    """Start, end (None while the run can go on) and the total from start to end (or to now)."""
    end = doc.finished_at if doc.status.is_terminal else None
    total = ((end or datetime.now(UTC)) - doc.created_at).total_seconds()
    return {"started_at": doc.created_at.isoformat(), "ended_at": end.isoformat() if end else None,
            "duration_s": round(max(0.0, total), 3)}


def run_detail(store: Store, doc: RunDoc, cp: Checkpoint | None) -> tuple[dict[str, Any], str | None]:
    """The run's detail, in the order `iterion inspect --json` prints it (the CLI adds only
    ``continue_with``, a command line, before ``processes``), and the one-line account of an
    interrupted rewind (None without one)."""
    from iterion.rewind.marker import has_intent
    from iterion.store.subbot_tree import children_of, parent_of
    from iterion.workspace_checkpoint import recovery_hint

    rid = doc.id
    boundaries, rewinds = boundaries_and_rewinds(store, rid)
    detail: dict[str, Any] = {
        "id": doc.id, "name": doc.name, "status": doc.status.value, "workflow": doc.workflow_name,
        "file": doc.file_path, "digest": doc.workflow_digest, "failure_code": doc.failure_code, "error": doc.error,
        "workspace": doc.workspace_dir, "mode": doc.workspace_mode.value,
        "worktree": doc.worktree.model_dump() if doc.worktree else None,
        "checkpoint_node": cp.restart_node if cp else None,
        "anchor": cp.anchor_reason.value if cp else None,
        "pending": cp.pending_interaction.model_dump() if cp and cp.pending_interaction else None,
        "outputs": cp.outputs if cp else {},
        "executed": [f"{e.node}:{e.iteration}" for e in cp.executed] if cp else [],
        "budget": {"caps": doc.budget.model_dump(), "consumed": cp.accounting.model_dump() if cp else None},
        "boundaries": boundaries,
        "rewinds": rewinds,
        **timing(doc),
        # process groups the run recorded as alive (a takeover ends those still running)
        "processes": [c.model_dump(mode="json") for c in doc.children],
        # the subbot tree: the run that launched this one, and the children its subbot nodes launched
        "parent": parent_of(doc),
        "subbot_children": children_of(store, doc),
    }
    detail["interrupted_rewind"], interrupted = None, None
    if has_intent(store, rid):  # the intent's model imports the restore machinery: only when there is one
        from iterion.rewind.intent import inspect_view

        detail["interrupted_rewind"], interrupted = inspect_view(store, rid)
    if doc.final_commit:
        detail["final_branch"], detail["final_commit"] = doc.final_branch, doc.final_commit
    hint = recovery_hint(store, rid)  # an unreadable timeline is an error, never an absent hint
    if hint is not None:
        detail["workspace_checkpoint"] = hint
    return detail, interrupted
