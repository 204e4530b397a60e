"""Loops, routers and fan-out: edge selection, bounded counters, parallel branches."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from .conftest import events, launch, labels, write_bot

# routing, nodes and budgets: versioned in memory (the mechanisms have their own tests)
pytestmark = pytest.mark.usefixtures("memory_versioning")

LOOP = """
schema verdict:
  approved: bool
  summary: string

tool implement:
  command: "echo attempt {{loop.fix.iteration}} prev={{loop.fix.previous_output.summary}} >> log.txt && echo {{outputs.verify.history}} > history.json && echo ok"

agent verify:
  backend: "script"
  output: verdict
  user: "check {{outputs.implement.stdout}} history={{outputs.implement.history}}"
  publish: verdicts

workflow loop:
  entry: implement
  implement -> verify
  verify -> done when approved
  verify -> implement when not approved as fix(3)
"""


def test_loop_previous_output_history_and_counters(tmp_path: Path, ws: Path, store: Store) -> None:
    script = {"verify": {"0": {"output": {"approved": False, "summary": "s0"}},
                         "1": {"output": {"approved": False, "summary": "s1"}},
                         "*": {"output": {"approved": True, "summary": "done"}}}}
    r = launch(store, write_bot(tmp_path / "src", LOOP, script), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert (ws / "log.txt").read_text().splitlines() == [
        # values are quoted shell words; a null one leaves its marker (dsl.md 5.3)
        # "the loop-edge source's output at the PREVIOUS crossing (empty before the second
        # crossing)" (dsl.md 3.5): one crossing of lag
        "attempt 0 prev={{loop.fix.previous_output.summary}}", "attempt 1 prev={{loop.fix.previous_output.summary}}",
        "attempt 2 prev=s0"]
    assert json.loads((ws / "history.json").read_text()) == [  # every earlier verify output, in order
        {"approved": False, "summary": "s0"}, {"approved": False, "summary": "s1"}]
    cp = store.load_checkpoint(r.run_id)
    assert cp.loop_counters == {"fix": 2}
    assert cp.loop_previous["fix"] == {"approved": False, "summary": "s0"}
    assert cp.loop_crossed["fix"] == {"approved": False, "summary": "s1"}
    assert cp.loop_current["fix"] == {"approved": True, "summary": "done"}
    assert len(cp.history["implement"]) == 3 and len(cp.history["verify"]) == 3
    assert [e.payload["iteration"] for e in events(store, r.run_id, "loop_iteration")] == [1, 2]
    assert "pre:implement:2" in labels(store, r.run_id)
    assert cp.artifact_versions == {"verdicts": 3}  # one version per publication
    arts = store.artifacts(r.run_id)
    assert arts.versions("verdicts") == [1, 2, 3] and arts.read("verdicts", 1).value["summary"] == "s0"
    assert arts.latest("verdicts").value == {"approved": True, "summary": "done"}


def test_exhausted_loop_is_not_taken_and_names_the_loop(tmp_path: Path, ws: Path, store: Store) -> None:
    script = {"verify": {"*": {"output": {"approved": False, "summary": "never"}}}}
    r = launch(store, write_bot(tmp_path / "src", LOOP, script), ws)
    assert r.status is RunStatus.FAILED_RESUMABLE
    assert r.failure_code == "NO_OUTGOING_EDGE"
    assert "loop fix(3) is exhausted" in r.error
    assert len((ws / "log.txt").read_text().splitlines()) == 4  # first pass + 3 loop iterations
    assert store.load_checkpoint(r.run_id).restart_node == "verify"


ROUTERS = """
schema pick:
  n: int

compute start:
  output: pick
  expr:
    n: "7"

router choose:
  mode: condition

router turn:
  mode: round_robin

tool big:
  command: "echo big >> path.txt"

tool small:
  command: "echo small >> path.txt"

tool a:
  command: "echo a >> rr.txt"

tool b:
  command: "echo b >> rr.txt"

workflow routers:
  entry: start
  start -> choose
  choose -> big when "outputs.start.n > 5"
  choose -> small
  big -> turn
  small -> turn
  turn -> a
  turn -> b
  a -> done
  b -> done
"""


def test_condition_and_round_robin_routers(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", ROUTERS)
    r1 = launch(store, bot, ws)
    assert r1.status is RunStatus.FINISHED, r1.error
    assert (ws / "path.txt").read_text() == "big\n"
    assert r1.outputs["choose"] == {"selected": ["big"]}
    assert store.load_checkpoint(r1.run_id).round_robin == {"turn": 1}
    assert (ws / "rr.txt").read_text() == "a\n"


def test_round_robin_position_is_persisted_across_visits(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        schema c:
          n: int

        router turn:
          mode: round_robin

        tool a:
          command: "echo a >> rr.txt"

        tool b:
          command: "echo b >> rr.txt"

        compute count:
          output: c
          expr:
            n: "loop.again.iteration"

        workflow rr:
          entry: turn
          turn -> a
          turn -> b
          a -> count
          b -> count
          count -> done when "loop.again.iteration >= 2"
          count -> turn as again(5)
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert (ws / "rr.txt").read_text().split() == ["a", "b", "a"]
    assert store.load_checkpoint(r.run_id).round_robin == {"turn": 3}


def test_llm_router_picks_through_the_backend(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        router pick:
          mode: llm
          model: "m"
          backend: "script"
          user: "which?"

        tool left:
          command: "echo left"

        tool right:
          command: "echo right"

        workflow l:
          entry: pick
          pick -> left
          pick -> right
          left -> done
          right -> done
    """, {"pick": {"*": {"select": "right"}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["pick"]["selected"] == ["right"] and "left" not in r.outputs


FANOUT = """
schema merged:
  count: int

router spread:
  mode: fan_out_all

tool one:
  command: "{{!vars.cmd1}}"

tool two:
  command: "sleep 0.2; echo two > two.txt; echo two"

tool three:
  command: "sleep 0.2; echo three > three.txt; echo three"

compute join:
  await: {mode}
  output: merged
  expr:
    count: "length(outputs.spread.selected)"

workflow fan:
  vars:
    cmd1: string = "echo one > one.txt; echo one"
  entry: spread
  budget:
    max_parallel_branches: {parallel}
  spread -> one
  spread -> two
  spread -> three
  one -> join
  two -> join
  three -> join
  join -> done
"""


def _fanout(mode: str = "wait_all", parallel: int = 3) -> str:
    return FANOUT.replace("{mode}", mode).replace("{parallel}", str(parallel))


def test_fan_out_wait_all_runs_branches_in_parallel_and_converges(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", _fanout()), ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert {p.name for p in ws.glob("*.txt")} == {"one.txt", "two.txt", "three.txt"}
    assert r.outputs["join"] == {"count": 3}
    evs = events(store, r.run_id)
    # two and three overlapped: both started before either finished
    order = [(e.type, e.node) for e in evs if e.type in ("node_started", "node_finished") and e.node in ("two", "three")]
    assert [t for t, _ in order[:2]] == ["node_started", "node_started"]
    # one checkpoint at convergence (restart at the join), none per branch node
    restarts = [e.payload["restart_node"] for e in evs if e.type == "checkpoint_written"]
    assert restarts == ["spread", "join", None]
    cp = store.load_checkpoint(r.run_id)
    assert {"one", "two", "three", "join"} <= set(cp.outputs)
    lab = labels(store, r.run_id)
    for n in ("one", "two", "three"):
        assert f"pre:{n}:0" in lab and f"nodes:{n}:0" in lab


def test_fan_out_max_parallel_branches_serialises(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", _fanout(parallel=1)), ws)
    assert r.status is RunStatus.FINISHED, r.error
    evs = [(e.type, e.node) for e in events(store, r.run_id) if e.type in ("node_started", "node_finished")
           and e.node in ("one", "two", "three")]
    # one branch at a time: every start is followed by its own finish
    for i in range(0, len(evs), 2):
        assert evs[i][0] == "node_started" and evs[i + 1] == ("node_finished", evs[i][1])


def test_fan_out_wait_all_fails_anchored_on_the_router(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", _fanout()), ws, vars={"cmd1": "exit 9"})
    assert r.status is RunStatus.FAILED_RESUMABLE
    assert r.failure_code == "TOOL_FAILED_PERMANENT" and "branch -> one" in r.error
    assert store.load_checkpoint(r.run_id).restart_node == "spread"
    assert events(store, r.run_id, "branch_failed")[0].payload["to"] == "one"


def test_fan_out_best_effort_drops_failed_branches(tmp_path: Path, ws: Path, store: Store) -> None:
    r = launch(store, write_bot(tmp_path / "src", _fanout("best_effort")), ws, vars={"cmd1": "exit 9"})
    assert r.status is RunStatus.FINISHED, r.error
    warnings = [e.payload["message"] for e in events(store, r.run_id, "warning")]
    assert any("branch -> one failed" in w for w in warnings)
    assert "one" not in store.load_checkpoint(r.run_id).outputs


def test_budget_max_iterations_names_axis_cap_and_consumption(tmp_path: Path, ws: Path, store: Store) -> None:
    script = {"verify": {"*": {"output": {"approved": False, "summary": "x"}}}}
    bot = write_bot(tmp_path / "src", LOOP.replace("  entry: implement", "  entry: implement\n  budget:\n    max_iterations: 3"),
                    script)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BUDGET_EXCEEDED"
    assert "max_iterations cap 3" in r.error and "consumed 4" in r.error
    assert events(store, r.run_id, "budget_exceeded")[0].payload["axis"] == "max_iterations"


def test_budget_cost_cap_charges_backend_spend(tmp_path: Path, ws: Path, store: Store) -> None:
    script = {"verify": {"*": {"output": {"approved": False, "summary": "x"}, "cost_usd": 0.6}}}
    r = launch(store, write_bot(tmp_path / "src", LOOP, script), ws, budget=None)
    assert r.failure_code == "NO_OUTGOING_EDGE"  # no cap: the loop bound ends it
    from iterion.budget import BudgetAsk
    r2 = launch(store, write_bot(tmp_path / "src2", LOOP, script), ws, budget=BudgetAsk(max_cost_usd=1.0))
    assert r2.failure_code == "BUDGET_EXCEEDED" and "max_cost_usd" in r2.error
    assert store.load_checkpoint(r2.run_id).accounting.cost_usd == 1.2


def test_threads_are_not_left_behind(tmp_path: Path, ws: Path, store: Store) -> None:
    before = threading.active_count()
    launch(store, write_bot(tmp_path / "src", _fanout()), ws)
    assert threading.active_count() <= before + 1


def test_nested_fan_out_converges_inner_then_outer(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        router outer:
          mode: fan_out_all

        router inner:
          mode: fan_out_all

        tool lint_py:
          command: "echo py > py.txt"

        tool lint_js:
          command: "echo js > js.txt"

        tool inner_join:
          command: "cat py.txt js.txt"
          await: wait_all

        tool build:
          command: "echo built > build.txt"

        tool outer_join:
          command: "cat build.txt py.txt"
          await: wait_all

        workflow nested:
          entry: outer
          budget:
            max_parallel_branches: 1
          outer -> inner
          outer -> build
          inner -> lint_py
          inner -> lint_js
          lint_py -> inner_join
          lint_js -> inner_join
          inner_join -> outer_join
          build -> outer_join
          outer_join -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["inner_join"]["stdout"] == "py\njs\n"
    assert r.outputs["outer_join"]["stdout"] == "built\npy\n"
    executed = [e.node for e in store.load_checkpoint(r.run_id).executed]
    assert executed.index("inner_join") > max(executed.index("lint_py"), executed.index("lint_js"))
    assert executed[-1] == "outer_join" and executed.count("outer_join") == 1


def test_duration_cap_stops_a_running_tool(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        tool slow:
          command: "sleep 30"

        workflow d:
          entry: slow
          budget:
            max_duration: "1s"
          slow -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BUDGET_EXCEEDED"
    assert "max_duration" in r.error
    assert store.load_checkpoint(r.run_id).restart_node == "slow"


def test_llm_router_with_multi_fans_out_to_every_pick(tmp_path: Path, ws: Path, store: Store) -> None:
    bot = write_bot(tmp_path / "src", """
        router pick:
          mode: llm
          model: "m"
          backend: "script"
          multi: true
          user: "which?"

        tool a:
          command: "echo a > a.txt"

        tool b:
          command: "echo b > b.txt"

        tool c:
          command: "echo c > c.txt"

        tool join:
          command: "ls *.txt"
          await: best_effort

        workflow m:
          entry: pick
          pick -> a
          pick -> b
          pick -> c
          a -> join
          b -> join
          c -> join
          join -> done
    """, {"pick": {"*": {"select": ["a", "c"]}}})
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["pick"]["selected"] == ["a", "c"]
    assert r.outputs["join"]["stdout"].split() == ["a.txt", "c.txt"]


def test_cancel_during_a_fan_out_anchors_on_the_router(tmp_path: Path, ws: Path, store: Store) -> None:
    from iterion.engine.cancel import CancelToken
    from iterion.engine.launch import LaunchOptions, launch_run

    bot = write_bot(tmp_path / "src", _fanout().replace("sleep 0.2", "sleep 30"))
    token = CancelToken()

    def on_event(e) -> None:  # cancel once both slow branches are running
        if e.type == "node_started" and e.node == "three":
            threading.Timer(0.2, token.cancel, args=("operator cancel",)).start()

    r = launch_run(store, bot, LaunchOptions(workspace=ws, watch=False), token=token, listener=on_event)
    assert r.status is RunStatus.CANCELLED and r.error == "operator cancel"
    cp = store.load_checkpoint(r.run_id)
    assert cp.restart_node == "spread" and cp.anchor_reason.value == "cancel"
    lab = labels(store, r.run_id)
    assert "fail:three:0" in lab and "nodes:three:0" not in lab
