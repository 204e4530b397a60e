"""The checkpoint/run-document mutation of a rewind, on real store models and a real artifact store."""

from __future__ import annotations

from pathlib import Path

from .rewind_graphs import build

from iterion.rewind.invalidation import invalidated_nodes
from iterion.rewind.state_edit import current_attempt, park_run, resolve_anchor, rewind_checkpoint
from iterion.store.artifacts import ArtifactStore
from iterion.store.checkpoint import AnchorReason, Checkpoint, PendingInteraction
from iterion.store.run_doc import RunDoc
from iterion.store.status import RunStatus


def loop_checkpoint() -> Checkpoint:
    # plan -> implement -> verify -> implement as fix(3); verify -> ship; ship -> gate
    cp = Checkpoint(run_id="r1")
    for node, it, out in [("plan", 0, {"p": 1}), ("implement", 0, {"i": 0}), ("verify", 0, {"ok": False}),
                          ("implement", 1, {"i": 1}), ("verify", 1, {"ok": True}), ("ship", 0, {"s": 1})]:
        cp.record_executed(node, it)
        cp.set_output(node, out, in_loop=node in ("implement", "verify"))
    cp.loop_counters["fix"] = 1
    cp.artifact_versions = {"patch": 2}
    cp.backend_sessions = {"implement": "sess-impl", "plan": "sess-plan"}
    cp.pending_interaction = PendingInteraction(id="i1", node="gate", questions={"ok": "bool"})
    cp.recovery_pause = True
    cp.recovery_code = "AUTH_FAILED"
    cp.accounting.tokens = 1234
    return cp


def loop_graph():
    return build("plan", [("plan", "implement"), ("implement", "verify"), ("verify", "implement"),
                          ("verify", "ship"), ("ship", "gate"), ("gate", "done")])


def test_loop_rewind_keeps_the_loop_partner_and_every_counter(tmp_path: Path) -> None:
    wf, cp = loop_graph(), loop_checkpoint()
    arts = ArtifactStore(tmp_path)
    arts.publish("patch", "v1", node="implement", iteration=0)
    arts.publish("patch", "v2", node="implement", iteration=1)
    dropped = invalidated_nodes(wf, "implement")
    assert dropped == {"implement", "ship", "gate"}
    cp.node_inputs = {"implement": {"task": "x"}, "ship": {"stale": True}}
    anchor = resolve_anchor(cp, "implement", None, None)
    assert anchor is not None and (anchor.iteration, anchor.start, anchor.attempt) == (1, 3, False)
    res = rewind_checkpoint(cp, anchor, dropped, [arts.read("patch", v) for v in arts.versions("patch")],
                            predecessors=set(wf.predecessors("implement")))

    # the replay is implement's next iteration: visit counters are not refunded
    assert (cp.restart_node, cp.restart_iteration, cp.anchor_reason) == ("implement", 2, AnchorReason.REWIND)
    assert res.restart_iteration == 2
    # verify's output survives (implement re-reads it through loop.fix.previous_output)
    assert cp.outputs == {"plan": {"p": 1}, "verify": {"ok": True}}
    # only the execution being redone leaves the order and the history
    assert [(e.node, e.iteration) for e in cp.executed] == [("plan", 0), ("implement", 0), ("verify", 0), ("verify", 1)]
    assert cp.history["implement"] == [{"i": 0}]
    assert cp.history["verify"] == [{"ok": False}, {"ok": True}]
    # never reset: loop counters, visits, version counters, accounting
    assert cp.loop_counters == {"fix": 1}
    assert cp.node_visits["implement"] == 2 and cp.node_visits["ship"] == 1
    assert cp.artifact_versions == {"patch": 2}
    assert cp.accounting.tokens == 1234
    # reset: pending interaction, recovery marker, dropped nodes' sessions
    assert cp.pending_interaction is None and not cp.recovery_pause and cp.recovery_code is None
    assert cp.backend_sessions == {"plan": "sess-plan"}
    # the pivot keeps the input its (surviving) predecessor mapped; a dropped node's goes
    assert cp.node_inputs == {"implement": {"task": "x"}}
    # implement's undone execution was entered from verify (the loop edge)
    assert cp.came_from == "verify"
    # the superseded artifact is tombstoned logically; both versions stay on disk
    assert res.tombstoned == {"patch": [2]}
    assert cp.tombstoned_artifacts == {"patch": [2]}
    assert arts.versions("patch") == [1, 2]
    assert cp.live_artifact_version("patch") == 1


def test_run_document_is_parked_for_an_explicit_resume() -> None:
    doc = RunDoc(id="r1", name="t-x-y", workflow_name="t", status=RunStatus.FAILED,
                 failure_code="WORKFLOW_FAILED", error="boom", subbot_children={"ship": "child1", "plan": "child0"})
    orphaned = park_run(doc, {"implement", "ship"})
    assert orphaned == {"ship": "child1"}
    assert doc.subbot_children == {"plan": "child0"}
    assert doc.status is RunStatus.PAUSED_OPERATOR and doc.explicit_resume_required
    assert doc.failure_code is None and doc.error is None


def test_the_attempt_the_run_stopped_inside() -> None:
    cp = Checkpoint(run_id="r1")
    cp.record_executed("plan", 0)
    cp.restart_node = "implement"
    # proven by a recorded pre: boundary of its current iteration
    a = current_attempt(cp, {"plan": {0}, "implement": {0}})
    assert a is not None and (a.node, a.iteration, a.start, a.attempt) == ("implement", 0, 1, True)
    assert current_attempt(cp, {"plan": {0}}) is None  # cancelled before it started
    # without the workspace's record, the checkpoint's anchor reason decides
    cp.anchor_reason = AnchorReason.FAILURE
    assert current_attempt(cp, None) is not None
    cp.anchor_reason = AnchorReason.CANCEL
    assert current_attempt(cp, None) is None
    # the attempt wins over an earlier completed execution of the same node (loops)
    cp.record_executed("implement", 0)
    cp.restart_node, cp.anchor_reason = "implement", AnchorReason.FAILURE
    a = current_attempt(cp, {"implement": {0, 1}})
    assert a is not None and resolve_anchor(cp, "implement", a, {"implement": {0, 1}}) == a and a.iteration == 1
