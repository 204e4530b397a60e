"""The checkpoint: round trip, legacy documents without accounting, and the helpers."""

from __future__ import annotations

import json

import pytest

from iterion.budget import Usage
from iterion.store import AnchorReason, Checkpoint, CorruptDocumentError, PendingInteraction, RunDoc, Store


def test_round_trip(store: Store, run: RunDoc) -> None:
    assert store.load_checkpoint(run.id) is None
    cp = Checkpoint(restart_node="review", restart_iteration=1, anchor_reason=AnchorReason.FAILURE)
    cp.record_executed("edit", 0)
    cp.set_output("edit", {"stdout": "ok"}, in_loop=True)
    cp.record_executed("review", 0)
    cp.record_executed("edit", 1)
    cp.set_output("edit", {"stdout": "ok2"}, in_loop=True)
    cp.loop_counters["fix"] = 1
    cp.round_robin["rr"] = 2
    cp.artifact_versions["plan"] = 3
    cp.tombstone_artifact("plan", 3)
    cp.bump_recovery_attempt("review", "RATE_LIMITED")
    cp.pending_interaction = PendingInteraction(id="i1", node="review", kind="ask_user", questions={"q": "why?"})
    cp.backend_sessions["review"] = "sess-1"
    cp.recovery_pause, cp.recovery_code = True, "AUTH_FAILED"
    cp.accounting = Usage(tokens=10, cost_usd=0.5, iterations=3, active_duration_s=12.5, cumulative_cost_usd=0.5)
    store.save_checkpoint(run.id, cp)
    got = store.load_checkpoint(run.id)
    assert got is not None
    assert got.run_id == run.id
    assert got.restart_node == "review" and got.restart_iteration == 1
    assert got.anchor_reason is AnchorReason.FAILURE
    assert [(e.node, e.iteration) for e in got.executed] == [("edit", 0), ("review", 0), ("edit", 1)]
    assert got.first_execution_index("review") == 1 and got.first_execution_index("nope") is None
    assert got.node_visits == {"edit": 2, "review": 1} and got.node_iterations["edit"] == 1
    assert got.history["edit"] == [{"stdout": "ok"}, {"stdout": "ok2"}]
    assert got.outputs["edit"] == {"stdout": "ok2"}
    assert got.live_artifact_version("plan") == 2
    assert got.recovery_attempt("review", "RATE_LIMITED") == 1
    assert got.pending_interaction is not None and got.pending_interaction.kind == "ask_user"
    assert got.accounting.tokens == 10 and got.accounting.active_duration_s == 12.5
    assert got.recovery_code == "AUTH_FAILED"


def test_legacy_checkpoint_without_accounting_loads_zeros(store: Store, run: RunDoc) -> None:
    legacy = {"restart_node": "edit", "outputs": {"a": {"x": 1}}, "loop_counters": {"fix": 2}}
    store.paths(run.id).checkpoint_json.write_text(json.dumps(legacy))
    cp = store.load_checkpoint(run.id)
    assert cp is not None
    assert cp.accounting == Usage()
    assert cp.loop_counters == {"fix": 2}
    store.paths(run.id).checkpoint_json.write_text(json.dumps({**legacy, "accounting": None}))
    assert store.load_checkpoint(run.id).accounting.cost_usd == 0  # type: ignore[union-attr]


def test_newer_format_is_refused(store: Store, run: RunDoc) -> None:
    store.paths(run.id).checkpoint_json.write_text(json.dumps({"format_version": 99}))
    with pytest.raises(CorruptDocumentError, match="upgrade iterion"):
        store.load_checkpoint(run.id)
