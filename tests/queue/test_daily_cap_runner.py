"""`iterion runner --max-daily-cost-usd`: the cap of the runs a runner claims, counted in the
JetStream store every machine shares (KV <prefix>_spend)."""

from __future__ import annotations

from pathlib import Path

import yaml

from iterion.queue.publish import queue_launch
from iterion.store import RunStatus
from tests.queue.conftest import Cluster, make_forge, wait_for

COSTLY = """schema verdict:
  ok: bool

agent first:
  backend: "script"
  output: verdict
  user: "first"

agent second:
  backend: "script"
  output: verdict
  user: "second"

workflow costly:
  entry: first
  first -> second
  second -> done
"""
SCRIPT = {"first": {"*": {"output": {"ok": True}, "cost_usd": 1.0}},
          "second": {"*": {"output": {"ok": True}, "cost_usd": 1.0}}}


def test_the_runner_flag_parks_its_runs_at_the_shared_cap(cluster: Cluster, tmp_path: Path) -> None:
    forge = make_forge(tmp_path / "forge", {"costly.bot": COSTLY, "costly.script.yaml": yaml.safe_dump(SCRIPT)})
    runner = cluster.runner("capped", "--max-daily-cost-usd", "1.5")
    runner.wait_ready()
    store, queue = cluster.store(), cluster.queue()
    doc, _ = queue_launch(store, queue, request_id="req-cap", file="costly.bot", repo_url=str(forge), ref="main")
    wait_for(lambda: store.load_run(doc.id).status is RunStatus.PAUSED_OPERATOR, "the run to park at the cap")
    paused = [e for e in store.read_events(doc.id) if e.type == "run_paused"][-1].payload
    assert paused["pause_reason"] == "daily_cap" and paused["cap_usd"] == 1.5
    assert store.load_checkpoint(doc.id).restart_node == "second"  # $1, then $2 at the second node
    counter = store.docs.spend_counter()
    assert counter.today().spent_usd == 2.0 and counter.today().charges == 2
    assert not (runner.log.parent / "work-capped" / "store" / "spend").exists()  # in JetStream, not on disk
    assert runner.stop() == 0
