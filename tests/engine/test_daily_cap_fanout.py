"""The daily cap reached inside a fan-out branch: the run parks ``paused_operator`` anchored on
the router (the whole fan-out re-executes on resume, as after a cancel), never as a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store import RunStatus, Store
from iterion.store.spend import FileSpendCounter

from .conftest import events, launch, resume, write_bot

FANOUT = """
schema verdict:
  ok: bool

router spread:
  mode: fan_out_all

agent left:
  backend: "script"
  output: verdict
  user: "left"

agent right:
  backend: "script"
  output: verdict
  user: "right"

compute join:
  await: wait_all
  output: verdict
  expr:
    ok: "outputs.left.ok && outputs.right.ok"

workflow w:
  entry: spread
  spread -> left
  spread -> right
  left -> join
  right -> join
  join -> done
"""

SCRIPT = {"left": {"*": {"output": {"ok": True}, "cost_usd": 1.0}},
          "right": {"*": {"output": {"ok": True}, "cost_usd": 1.0}}}


def test_a_branch_reaching_the_cap_parks_the_run_on_the_router(tmp_path: Path, ws: Path, store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_DAILY_COST_CAP_USD", "1.5")
    r = launch(store, write_bot(tmp_path / "src", FANOUT, SCRIPT), ws)
    assert r.status is RunStatus.PAUSED_OPERATOR, r.error
    assert r.failure_code is None
    assert store.load_checkpoint(r.run_id).restart_node == "spread"
    paused = events(store, r.run_id, "run_paused")[-1].payload
    assert paused["pause_reason"] == "daily_cap" and paused["spent_today_usd"] == pytest.approx(2.0)
    assert FileSpendCounter(store.root).today().charges == 2  # both branches' calls were counted
    assert not events(store, r.run_id, "run_failed")
    # a pause, not a failure: no branch node reports node_failed (its code would be no FailureCode)
    assert not events(store, r.run_id, "node_failed")
    assert events(store, r.run_id, "run_paused")[-1].node == "spread"

    r2 = resume(store, r.run_id, max_daily_cost_usd=10)
    assert r2.status is RunStatus.FINISHED, r2.error
    assert r2.outputs["join"] == {"ok": True}
    assert FileSpendCounter(store.root).today().spent_usd == pytest.approx(4.0)
