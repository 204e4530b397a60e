"""Rewind between real engine executions, in process (fast): the loop-survival rule and the
fan-out promotion, replayed by the engine's own resume."""

from __future__ import annotations

from pathlib import Path

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.store import Store

LOOP = """\
schema verdict:
  ok: bool

tool implement:
  command: "printf 'x' >> work.txt && printf 'attempt {{loop.fix.iteration}}\\n' >> log.txt"

tool verify:
  output: verdict
  command: `if [ $(wc -c < work.txt) -ge 2 ]; then echo '{"ok": true}'; else echo '{"ok": false}'; fi`

tool ship:
  command: "test -f shipped.ok && printf 'shipped\\n' > ship.txt"

workflow loop:
  entry: implement
  implement -> verify
  verify -> implement when not ok as fix(3)
  verify -> ship when ok
  ship -> done
"""


def events_after_rewind(store: Store, run_id: str, kind: str = "node_started") -> list[str]:
    events = store.read_events(run_id)
    last = max(i for i, e in enumerate(events) if e.type == "run_rewound")
    return [e.node for e in events[last:] if e.type == kind]


def test_loop_partner_output_survives_a_rewind_and_the_counters_are_kept(repo: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    (repo / "loop.bot").write_text(LOOP)
    first = launch_run(store, repo / "loop.bot", LaunchOptions(workspace=repo, watch=False))
    assert first.status == "failed_resumable" and first.checkpoint_node == "ship"
    before = store.load_checkpoint(first.run_id)
    assert before is not None and before.loop_counters.get("fix") == 1

    res = rewind_run(store, RewindRequest(run_id=first.run_id, node="implement"))
    assert res.dropped_nodes == ["implement", "ship"]  # verify reaches implement back: it survives
    cp = store.load_checkpoint(first.run_id)
    assert cp is not None and "verify" in cp.outputs and "implement" not in cp.outputs
    assert cp.loop_counters == before.loop_counters  # never refunded
    assert cp.accounting.iterations == before.accounting.iterations
    # files: back to what implement's latest execution started from (one 'x' written)
    assert (repo / "work.txt").read_text() == "x"

    (repo / "shipped.ok").write_text("")
    done = resume_run(store, first.run_id, ResumeOptions(watch=False))
    assert done.status == "finished"
    assert events_after_rewind(store, first.run_id) == ["implement", "verify", "ship"]
    # the replay of implement ran at the loop's current iteration, not from zero
    assert (repo / "log.txt").read_text().splitlines()[-1] == "attempt 1"


FAN = """\
tool prep:
  command: "echo prep"

router split:
  mode: fan_out_all

tool left:
  command: "echo left > left.txt"

tool right:
  command: "echo right > right.txt"

tool join:
  command: "test -f ok.txt"
  await: wait_all

workflow fan:
  entry: prep
  prep -> split
  split -> left
  split -> right
  left -> join
  right -> join
  join -> done
"""


def test_a_body_node_pivot_replays_the_whole_fan_out(repo: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    (repo / "fan.bot").write_text(FAN)
    first = launch_run(store, repo / "fan.bot", LaunchOptions(workspace=repo, watch=False))
    assert first.status == "failed_resumable"
    res = rewind_run(store, RewindRequest(run_id=first.run_id, node="right"))
    assert (res.to_node, res.promoted_from) == ("split", "right")
    # (the branches ran in parallel threads: their order is whichever finished first)
    d = res.dropped_nodes
    assert d[0] == "split" and sorted(d[1:3]) == ["left", "right"] and d[3] == "join"
    assert not (repo / "left.txt").exists() and not (repo / "right.txt").exists()
    (repo / "ok.txt").write_text("")
    done = resume_run(store, first.run_id, ResumeOptions(watch=False))
    assert done.status == "finished"
    assert sorted(events_after_rewind(store, first.run_id)) == ["join", "left", "right", "split"]
    assert (repo / "left.txt").exists() and (repo / "right.txt").exists()
