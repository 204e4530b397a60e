"""Pause/fail/resume through the engine API: human gates, fixed tools, resumable fail nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.budget import BudgetAsk
from iterion.engine.errors import EngineError
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.source import compile_source
from iterion.engine.resume import SourceChanged
from iterion.store import RunStatus, Store, StoreError

from .conftest import events, labels, launch, resume, write_bot

GATE = """
schema approval:
  approved: bool
  note: string

tool prepare:
  command: "echo draft > draft.txt && echo prepared"

human approve:
  output: approval
  instructions: "Ship {{outputs.prepare.stdout}}?"

tool ship:
  command: "echo '{{outputs.approve.note}}' > shipped.txt && echo shipped"

workflow gate:
  entry: prepare
  prepare -> approve
  approve -> ship when approved
  approve -> done when not approved
  ship -> done
"""


def test_human_gate_pauses_then_answers_become_its_output(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", GATE), ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    assert r.pending["node"] == "approve"
    assert r.pending["instructions"] == "Ship prepared\n?"
    assert [f["name"] for f in r.pending["fields"]] == ["approved", "note"]
    cp = store.load_checkpoint(r.run_id)
    assert cp.restart_node == "approve" and cp.anchor_reason.value == "human_pause"
    assert cp.pending_interaction is not None and cp.pending_interaction.node == "approve"
    assert labels(store, r.run_id)[-2:] == ["pre:approve:0", "pause:approve:0"]

    with pytest.raises(StoreError, match="waiting for answers to node approve") as refused:
        resume(store, r.run_id)
    # the hint names the run by its name and every known field, never FIELD (issue 34 point 4)
    hint = str(refused.value.hint)
    assert store.load_run(r.run_id).name in hint and "FIELD" not in hint
    assert "'approved=<true|false>'" in hint and "'note=<text>'" in hint
    with pytest.raises(EngineError, match="placeholder of the printed command"):
        resume(store, r.run_id, answers={"approved": "<true|false>", "note": "x"})
    with pytest.raises(EngineError, match="not a bool"):
        resume(store, r.run_id, answers={"approved": "perhaps", "note": "x"})

    r2 = resume(store, r.run_id, answers={"approved": "true", "note": "ship it"})
    assert r2.status is RunStatus.FINISHED, r2.error
    assert r2.run_id == r.run_id
    assert r2.outputs["approve"] == {"approved": True, "note": "ship it"}
    assert (ws / "shipped.txt").read_text() == "ship it\n"
    lab = labels(store, r.run_id)
    assert lab[lab.index("pause:approve:0"):] == ["pause:approve:0", "resume:approve:0", "nodes:approve:0",
                                                 "pre:ship:0", "nodes:ship:0"]
    inter = store.interactions(r.run_id).load(cp.pending_interaction.id)
    assert inter.answers == {"approved": "true", "note": "ship it"}
    resumed = events(store, r.run_id, "run_resumed")[0]
    assert resumed.payload["restart_node"] == "approve" and resumed.payload["from_status"] == "paused_waiting_human"
    # executed only the gate and what follows: prepare ran once
    assert [e.node for e in store.load_checkpoint(r.run_id).executed] == ["prepare", "approve", "ship"]


def test_answers_known_up_front_skip_the_pause(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", GATE), ws,
               answers={"approve": {"approved": False, "note": "no"}})
    assert r.status is RunStatus.FINISHED and r.outputs["approve"] == {"approved": False, "note": "no"}


def test_tool_fails_fix_then_resume_reexecutes_only_that_node(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        tool first:
          command: "echo run >> first.log"

        tool check:
          command: "test -f fixed.flag && echo checked"

        tool last:
          command: "echo run >> last.log"

        workflow fixme:
          entry: first
          first -> check
          check -> last
          last -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "TOOL_FAILED_PERMANENT"
    assert store.load_checkpoint(r.run_id).restart_node == "check"
    (ws / "fixed.flag").write_text("1")  # the operator's fix, made while the run is parked
    r2 = resume(store, r.run_id)
    assert r2.status is RunStatus.FINISHED, r2.error
    assert (ws / "first.log").read_text() == "run\n"  # not re-executed
    assert (ws / "last.log").read_text() == "run\n"
    lab = labels(store, r.run_id)
    assert lab[lab.index("fail:check:0"):lab.index("nodes:check:0") + 1] == [
        "fail:check:0", "resume:check:0", "nodes:check:0"]
    doc = store.load_run(r.run_id)
    assert doc.failure_code is None and doc.error is None
    with pytest.raises(StoreError, match="finished run cannot be resumed"):
        resume(store, r.run_id)


GUARD = """## strict-escape: on
schema gate:
  over: bool

tool spend:
  command: "echo spending"

tool guard:
  output: gate
  command: "python3 -c 'import os; print(\\"{\\\\\\"over\\\\\\": %s}\\" % str(float(os.environ[\\"ITERION_BUDGET_MAX_COST_USD\\"]) < 5).lower())'"

fail too_costly:
  code: PHASE_BUDGET
  message: "phase budget too small after {{outputs.spend.stdout}}"
  resumable: true

tool finish:
  command: "echo finished > finished.txt"

workflow guarded:
  entry: spend
  budget:
    max_cost_usd: 2
  spend -> guard
  guard -> too_costly when over
  guard -> finish when not over
  finish -> done
"""


def test_resumable_fail_node_anchors_on_the_guard_and_raised_cap_takes_other_edge(
        tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", GUARD), ws)
    assert r.status is RunStatus.FAILED_RESUMABLE
    assert r.failure_code == "PHASE_BUDGET" and r.error == "phase budget too small after spending\n"
    cp = store.load_checkpoint(r.run_id)
    assert cp.restart_node == "guard" and cp.anchor_reason.value == "resumable_fail"
    assert "fail:too_costly:0" in labels(store, r.run_id)

    r2 = resume(store, r.run_id, budget=BudgetAsk(max_cost_usd=10))
    assert r2.status is RunStatus.FINISHED, r2.error
    assert (ws / "finished.txt").exists()
    assert store.load_run(r.run_id).budget.max_cost_usd == 10  # the merged ask persists
    # spend ran once; the guard was re-evaluated
    executed = [e.node for e in store.load_checkpoint(r.run_id).executed]
    assert executed.count("spend") == 1 and executed.count("guard") == 2


def test_non_resumable_fail_node_ends_failed(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", GUARD.replace("resumable: true", "resumable: false")), ws)
    assert r.status is RunStatus.FAILED and r.failure_code == "PHASE_BUDGET"
    with pytest.raises(StoreError, match="failed run cannot be resumed"):
        resume(store, r.run_id)


def test_resumable_fail_node_at_the_entry_degrades_to_failed_with_a_warning(
        tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        tool start:
          command: "echo start"

        fail refuse:
          code: NOT_ACTIONABLE
          message: "nothing to do"
          resumable: true

        workflow r:
          entry: start
          start -> refuse
    """)
    compiled = compile_source(bot)
    compiled.workflow.entry = "refuse"  # the fail node IS the entry (the DSL accepts `entry: refuse` too)
    r = launch_run(store, bot, LaunchOptions(workspace=ws, watch=False), compiled=compiled)
    assert r.status is RunStatus.FAILED and r.failure_code == "NOT_ACTIONABLE" and r.error == "nothing to do"
    warning = events(store, r.run_id, "warning")[0].payload
    assert warning["node"] == "refuse" and "workflow entry" in warning["reason"]


def test_changed_source_is_refused_before_executing_unless_forced(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", GATE)
    r = launch(store, bot, ws)
    recorded = store.load_run(r.run_id).workflow_digest
    bot.write_text(bot.read_text().replace("echo shipped", "echo shipped-v2"))
    before = len(events(store, r.run_id))
    with pytest.raises(SourceChanged) as info:
        resume(store, r.run_id, answers={"approved": "true", "note": "n"})
    assert recorded[:12] in info.value.message and info.value.current[:12] in info.value.message
    assert len(events(store, r.run_id)) == before  # nothing executed, nothing logged
    assert store.load_run(r.run_id).status is RunStatus.PAUSED_WAITING_HUMAN
    r2 = resume(store, r.run_id, answers={"approved": "true", "note": "n"}, force=True)
    assert r2.status is RunStatus.FINISHED and r2.outputs["ship"]["stdout"] == "shipped-v2\n"
    doc = store.load_run(r.run_id)
    assert doc.workflow_digest != recorded and "shipped-v2" in doc.workflow_source  # re-stamped


def test_checkpoint_that_cannot_be_written_falls_back_to_failed(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        tool a:
          command: "rm -f {{vars.block}} && mkdir {{vars.block}} && echo a"

        tool b:
          command: "echo b"

        workflow w:
          vars:
            block: string = ""
          entry: a
          a -> b
          b -> done
    """)
    # a directory where checkpoint.json should be: every later checkpoint write fails for real
    rid = "01" + "0" * 30
    blocked = store.paths(rid).checkpoint_json
    r = launch(store, bot, ws, run_id=rid, vars={"block": str(blocked)})
    assert blocked.is_dir()
    assert r.status is RunStatus.FAILED and r.failure_code == "CHECKPOINT_LOST"
    assert events(store, rid, "checkpoint_lost")
    assert [e.node for e in events(store, rid, "node_started")] == ["a"]


def test_budget_failure_resumes_only_with_a_cap_above_consumption(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema v:
          n: int

        agent spend:
          backend: "script"
          output: v
          user: "go"

        tool after:
          command: "echo after > after.txt"

        workflow b:
          entry: spend
          budget:
            max_tokens: 100
          spend -> after
          after -> done
    """, {"spend": {"*": {"output": {"n": 1}, "tokens_in": 100, "tokens_out": 50}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BUDGET_EXCEEDED"
    assert "max_tokens cap 100 reached (consumed 150)" in r.error
    with pytest.raises(EngineError, match="BUDGET_EXCEEDED"):
        resume(store, r.run_id)  # same cap: refused up front, nothing executes
    assert store.load_run(r.run_id).status is RunStatus.FAILED_RESUMABLE
    with pytest.raises(EngineError, match="cap of 120"):
        resume(store, r.run_id, budget=BudgetAsk(max_tokens=120))
    r2 = resume(store, r.run_id, budget=BudgetAsk(max_tokens=1000))
    assert r2.status is RunStatus.FINISHED, r2.error
    assert store.load_checkpoint(r.run_id).accounting.tokens == 300  # the re-executed call was charged too


def test_artifacts_are_readable_after_a_resume(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema ok:
          go: bool

        schema rep:
          stdout: string

        agent make:
          backend: "script"
          output: rep
          publish: report

        human gate:
          output: ok

        tool use:
          command: "echo got {{artifacts.report.stdout}}"

        workflow a:
          entry: make
          make -> gate
          gate -> use
          use -> done
    """, {"make": {"*": {"output": {"stdout": "v1"}}}})  # a tool has no publish (dsl.md 2.7): an agent publishes
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    r2 = resume(store, r.run_id, answers={"go": "yes"})
    assert r2.status is RunStatus.FINISHED, r2.error
    assert r2.outputs["use"]["stdout"] == "got v1\n"
