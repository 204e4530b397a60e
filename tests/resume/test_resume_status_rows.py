"""One test per row of the spec's "Resumable states" table, driven through the CLI in subprocesses."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from iterion.store import RunDoc, RunStatus, Store
from iterion.store.ids import new_id

from .conftest import cli, cli_json, events, executed, only_run, start_cli, wait_for_file, write_bot

# `slow` announces itself, then waits for the test's go.flag: the test decides when it ends.
SLOW = """
tool first:
  command: "echo first >> first.log"

tool slow:
  command: "echo $$ > slow.pid; echo started > slow.started; while [ ! -f go.flag ]; do sleep 0.02; done; echo slow >> slow.log"

tool after:
  command: "echo after >> after.log"

workflow slowpoke:
  entry: first
  first -> slow
  slow -> after
  after -> done
"""


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_paused_waiting_human_answers_typed_from_flags_file_and_uploads(tmp_path: Path, ws: Path,
                                                                         store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        schema answer:
          approved: bool
          count: int
          note: string
          doc: file
          raw: file

        human gate:
          output: answer
          instructions: "fill me"

        tool use:
          command: "cat '{{outputs.gate.doc}}' > copied.txt"

        workflow h:
          entry: gate
          gate -> use when approved
          gate -> done when not approved
          use -> done
    """)
    rc, run = cli_json("run", str(bot), cwd=ws, store=store_dir)
    assert rc == 4 and run["status"] == "paused_waiting_human"
    rid = run["run_id"]
    # a bad value: refused before anything is claimed, naming the field and the expected type
    bad = cli("resume", "--run-id", rid, "--answer", "approved=yes", "--answer", "count=many", "--answer", "note=n",
              "--answer", "doc=x", "--answer", "raw=y", cwd=ws, store=store_dir)
    assert bad.returncode == 2 and "count" in bad.stderr and "int" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    assert Store(store_dir).load_run(rid).status is RunStatus.PAUSED_WAITING_HUMAN

    (ws / "upload.txt").write_text("uploaded bytes\n")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"approved": True, "count": 2, "note": "from the file"}))
    rc, done = cli_json("resume", "--run-id", rid, "--answers-file", str(answers), "--answer", "note=@literal",
                        "--answer", "doc=@./upload.txt", "--answer", "raw=@@at", cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished", done
    out = done["outputs"]["gate"]
    assert out["approved"] is True and out["count"] == 2  # JSON types kept
    assert out["note"] == "@literal"                       # explicit flag overrides; @ untouched in a string field
    assert out["raw"] == "@at"                              # @@ escapes a literal @ in a file field
    staged = Path(out["doc"])                               # @path staged as a run attachment
    assert staged.is_file() and staged.is_relative_to(store_dir.resolve()) and staged.read_text() == "uploaded bytes\n"
    assert (ws / "copied.txt").read_text() == "uploaded bytes\n"
    assert Store(store_dir).attachments(rid).get("doc") is not None
    assert [e.payload["name"] for e in events(store_dir, rid, "attachment_staged")] == ["doc"]


def test_failed_resumable_tool_fixed_then_resume_reexecutes_only_that_node(tmp_path: Path, ws: Path,
                                                                             store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool first:
          command: "echo run >> first.log"

        tool check:
          command: "echo try >> check.log; test -f fixed.flag"

        tool last:
          command: "echo run >> last.log"

        workflow fixme:
          entry: first
          first -> check
          check -> last
          last -> done
    """)
    rc, run = cli_json("run", str(bot), cwd=ws, store=store_dir)
    assert rc == 5 and run["status"] == "failed_resumable" and run["failure_code"] == "TOOL_FAILED_PERMANENT"
    assert run["checkpoint_node"] == "check"
    (ws / "fixed.flag").write_text("")
    rc, done = cli_json("resume", "--run-id", run["run_id"], cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished", done
    assert (_lines(ws / "first.log"), _lines(ws / "check.log"), _lines(ws / "last.log")) == (1, 2, 1)
    # finished: no resume
    again = cli("resume", "--run-id", run["run_id"], cwd=ws, store=store_dir)
    assert again.returncode == 2 and "finished run cannot be resumed" in again.stderr


def test_cancelled_by_ctrl_c_then_resume_continues_without_rerunning_completed_nodes(
        tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    proc = start_cli("run", str(bot), cwd=ws, store=store_dir)
    wait_for_file(ws / "slow.started", proc)
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 6, err
    rid = only_run(store_dir)
    store = Store(store_dir)
    doc, cp = store.load_run(rid), store.load_checkpoint(rid)
    assert doc.status is RunStatus.CANCELLED and cp.restart_node == "slow" and cp.anchor_reason.value == "cancel"
    (ws / "go.flag").write_text("")
    rc, done = cli_json("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished", done
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)
    assert executed(store_dir, rid) == ["first:0", "slow:0", "after:0"]


def test_cancelled_by_iterion_cancel_interrupts_the_live_run(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    proc = start_cli("run", str(bot), cwd=ws, store=store_dir)
    wait_for_file(ws / "slow.started", proc)
    rid = only_run(store_dir)
    rc, outcome = cli_json("cancel", "--run-id", rid, cwd=ws, store=store_dir)
    assert rc == 0 and outcome["status"] == "cancelled" and outcome["restart_node"] == "slow", outcome
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 6, err
    doc = Store(store_dir).load_run(rid)
    assert doc.failure_code == "CANCELLED" and "iterion cancel" in (doc.error or "")
    assert not (ws / "slow.log").exists()  # the tool was interrupted, not left to finish
    (ws / "go.flag").write_text("")
    rc, done = cli_json("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished"
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)


def test_paused_operator_takes_effect_at_the_next_node_boundary(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    proc = start_cli("run", str(bot), cwd=ws, store=store_dir)
    wait_for_file(ws / "slow.started", proc)
    rid = only_run(store_dir)
    p = cli("pause", "--run-id", rid, "--wait", "0", cwd=ws, store=store_dir)
    assert p.returncode == 7 and "next node boundary" in p.stdout, p.stdout + p.stderr  # requested, not yet effective
    (ws / "go.flag").write_text("")  # the current node finishes normally ...
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 8, err  # paused_operator has its own code
    store = Store(store_dir)
    doc, cp = store.load_run(rid), store.load_checkpoint(rid)
    # ... and the run parks before the node about to execute
    assert doc.status is RunStatus.PAUSED_OPERATOR
    assert cp.restart_node == "after" and cp.anchor_reason.value == "operator_pause"
    assert _lines(ws / "slow.log") == 1 and not (ws / "after.log").exists()
    assert events(store_dir, rid, "run_paused")[-1].payload["by"] == "operator"
    refused = cli("pause", "--run-id", rid, cwd=ws, store=store_dir)
    assert refused.returncode == 2 and "paused_operator" in refused.stderr and "iterion resume" in refused.stderr
    rc, done = cli_json("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished"
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)


def test_running_needs_force_stale_and_a_provably_stale_owner(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", SLOW)
    proc = start_cli("run", str(bot), cwd=ws, store=store_dir)
    wait_for_file(ws / "slow.started", proc)
    rid = only_run(store_dir)
    stale_now = {"ITERION_STALE_AFTER_S": "0"}
    live = cli("resume", "--run-id", rid, "--force-stale", cwd=ws, store=store_dir, env=stale_now)
    assert live.returncode == 2 and "being executed by another process" in live.stderr, live.stderr
    proc.kill()  # the owner dies without recording anything
    proc.communicate(timeout=30)
    os.killpg(os.getpgid(int((ws / "slow.pid").read_text())), signal.SIGKILL)  # its orphaned tool
    assert Store(store_dir).load_run(rid).status is RunStatus.RUNNING
    # recorded on another host: its death cannot be proven here, so the 60 s guard applies (a
    # provably dead owner on this host is taken over at once: tests/faults/test_takeover_*.py)
    Store(store_dir).update_run(rid, lambda d: setattr(d.owner, "host", "another-host"))

    plain = cli("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert plain.returncode == 2 and "is running" in plain.stderr and "--force-stale" in plain.stderr
    fresh = cli("resume", "--run-id", rid, "--force-stale", cwd=ws, store=store_dir)  # the real 60 s window
    assert fresh.returncode == 2 and "only after 60 s" in fresh.stderr, fresh.stderr
    assert f"iterion cancel --run-id {rid}" in fresh.stderr  # the faster path, named
    (ws / "go.flag").write_text("")
    rc, done = cli_json("resume", "--run-id", rid, "--force-stale", cwd=ws, store=store_dir, env=stale_now)
    assert rc == 0 and done["status"] == "finished", done
    assert (_lines(ws / "first.log"), _lines(ws / "slow.log"), _lines(ws / "after.log")) == (1, 1, 1)


def test_queued_is_not_resumable_by_hand_and_cancel_just_moves_its_status(ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    rid = new_id()
    store.create_run(RunDoc(id=rid, name="queued-one", workflow_name="w", status=RunStatus.QUEUED))
    p = cli("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert p.returncode == 2 and "is queued" in p.stderr and "iterion cancel" in p.stderr, p.stderr
    rc, outcome = cli_json("cancel", "--run-id", rid, cwd=ws, store=store_dir)
    assert rc == 0 and outcome["status"] == "cancelled" and outcome["delivered"] == "direct"
    assert store.load_run(rid).status is RunStatus.CANCELLED
    assert events(store_dir, rid, "run_cancelled")[0].payload["from_status"] == "queued"


def test_failed_is_terminal(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool start:
          command: "echo start"

        fail refuse:
          code: LOT_NOT_ACTIONABLE
          message: "nothing to do"

        workflow t:
          entry: start
          start -> refuse
    """)
    rc, run = cli_json("run", str(bot), cwd=ws, store=store_dir)
    assert rc == 1 and run["status"] == "failed" and run["failure_code"] == "LOT_NOT_ACTIONABLE"
    p = cli("resume", "--run-id", run["run_id"], cwd=ws, store=store_dir)
    assert p.returncode == 2 and "failed run cannot be resumed" in p.stderr and "rewind" in p.stderr
