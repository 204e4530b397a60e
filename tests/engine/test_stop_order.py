"""Each kind of stop writes its steps in the one order of iterion.engine.stop.stop_run
(docs/technical/durability.md section 3): boundary, interaction record, checkpoint, status,
closing events. In process, real runs in a real git workspace; the timeline's tail shows the order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from .conftest import events, launch, write_bot

GATE = """
schema verdict:
  approved: bool

prompt ask:
  Approve?

tool first:
  command: "echo one > one.txt"

human gate:
  output: verdict
  instructions: ask

workflow w:
  entry: first
  first -> gate
  gate -> done
"""

BROKEN = """
tool first:
  command: "echo one > one.txt"

tool broken:
  command: "exit 3"

workflow w:
  entry: first
  first -> broken
  broken -> done
"""

TO_FAIL = """
tool first:
  command: "echo one > one.txt"

workflow w:
  entry: first
  first -> fail
"""

FINISHES = """
tool first:
  command: "echo one > one.txt"

workflow w:
  entry: first
  first -> done
"""

# (bot, final status, the timeline's last events as (type, boundary label or checkpoint anchor))
CASES = {
    "human gate": (GATE, RunStatus.PAUSED_WAITING_HUMAN,
                   [("boundary_written", "pause:gate:0"), ("checkpoint_written", "human_pause"),
                    ("human_input_requested", None), ("run_paused", None)]),
    "node failure": (BROKEN, RunStatus.FAILED_RESUMABLE,
                     [("boundary_written", "fail:broken:0"), ("node_failed", None), ("recovery_declined", None),
                      ("checkpoint_written", "failure"), ("run_failed", None)]),
    "fail terminal": (TO_FAIL, RunStatus.FAILED,
                      [("boundary_written", "fail:first:0"), ("checkpoint_written", "node_boundary"),
                       ("run_failed", None)]),
    "finished": (FINISHES, RunStatus.FINISHED,
                 [("edge_selected", None), ("checkpoint_written", "node_boundary"), ("run_finished", None)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_stop_writes_its_steps_in_the_one_order(tmp_path: Path, ws: Path, store: Store, case: str) -> None:
    text, status, tail = CASES[case]
    result = launch(store, write_bot(tmp_path / "src", text), ws)
    assert result.status is status, result
    timeline = [(e.type, e.payload.get("label") or e.payload.get("anchor")) for e in events(store, result.run_id)]
    # what the stop wrote after the node, in order; worktree banking and pushes come later, if at all
    closing = {"run_paused", "run_failed", "run_finished"}
    end = next(i for i, (kind, _) in enumerate(timeline) if kind in closing) + 1
    assert timeline[end - len(tail):end] == tail, timeline
    assert store.load_run(result.run_id).status is status
