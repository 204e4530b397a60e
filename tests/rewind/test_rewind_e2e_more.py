"""More of the loop through the CLI: an edit caught while a node ran (overwritten, banked), the
second rewind of a session (diffs against what the first replay ran), CLI refusals."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from ..conftest import git, run_cli, start_cli, wait_for_file
from .rewind_runs import cli_json, fake_run, loop_steps
from typer.testing import CliRunner

from cli.errors import CliError
from cli.main import app

from iterion.store import RunStatus, Store
from workspacetrack.tracker import Tracker

SLOW = """\
tool setup:
  command: "printf 'setup\\n' > a.txt"

tool slow:
  command: "printf 'partial\\n' > s.txt && sleep 60"

workflow k:
  entry: setup
  setup -> slow
  slow -> done
"""


def test_edit_while_a_node_ran_is_reported_overwritten_and_recoverable_from_the_bank(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    (repo / "a.txt").write_text("orig\n")
    (repo / "k.bot").write_text(SLOW)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "bot")
    proc = start_cli("run", "k.bot", "--json", cwd=repo, store=store,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_file(repo / "s.txt", proc)
        # a person edits a file the run produced while `slow` is running...
        (repo / "a.txt").write_text("a person's edit\n")
    finally:
        # ...and the run dies before `slow` could write any boundary
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    st = Store(store)
    (run_id,) = [r.id for r in st.list_runs()]
    # the orphan reconciliation (no live lock) parks a dead `running` run as failed_resumable
    st.update_run(run_id, lambda d: d.set_status(RunStatus.FAILED_RESUMABLE, failure_code="ORPHANED_RUN",
                                                 error="the run's owner died"))

    out = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "setup")
    files = out["files"]
    # in scope (setup wrote a.txt) but matching neither side of the recorded range: overwritten
    assert files["overwritten"] == ["a.txt"] and files["restored"] == ["a.txt"]
    assert (repo / "a.txt").read_text() == "orig\n"
    # slow's debris was never recorded (no boundary after it started): reported, not guessed at
    assert files["left_in_place"] == ["s.txt"] and (repo / "s.txt").exists()
    # the person's edit is recoverable from the bank the restore took first
    tracker = Tracker(st.track_dir(run_id), repo, run_id)
    digest = tracker.manifest(files["backup_ref"]).entries["a.txt"][0]
    assert tracker.read_object(digest) == b"a person's edit\n"
    ev = [e for e in st.read_events(run_id) if e.type == "run_rewound"][-1].payload
    assert ev["files_overwritten"] == ["a.txt"] and ev["files_left_in_place"] == ["s.txt"]
    assert ev["files_backup_ref"] == files["backup_ref"]


CHAIN = """\
schema out:
  text: string

prompt p_draft:
  Draft it.

prompt p_review:
  Review it.

tool setup:
  command: "printf 'setup\\n' > a.txt"

agent draft:
  backend: "script"
  output: out
  user: p_draft

agent review:
  backend: "script"
  output: out
  user: p_review

tool publish:
  command: "printf '%s\\n' '{{outputs.review.text}}' > pub.txt && grep -q ok pub.txt"

workflow chain:
  entry: setup
  setup -> draft
  draft -> review
  review -> publish
  publish -> done
"""

ANSWERS = 'draft:\n  "*": {output: {text: "d"}}\nreview:\n  "*": {output: {text: "REVIEW"}}\n'


def test_second_rewind_diffs_against_what_the_first_replay_ran(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    bot = repo / "chain.bot"
    bot.write_text(CHAIN)
    (repo / "chain.script.yaml").write_text(ANSWERS.replace("REVIEW", "bad"))
    first = cli_json(repo, store, "run", "chain.bot")
    assert first["status"] == "failed_resumable", first
    run_id = first["run_id"]

    # iteration 1: edit draft's prompt, rewind, replay (publish still fails)
    bot.write_text(bot.read_text().replace("Draft it.", "Draft it well."))
    r1 = cli_json(repo, store, "rewind", "--run-id", run_id, "--auto")
    assert r1["to_node"] == "draft"
    again = cli_json(repo, store, "resume", "--run-id", run_id, "--force")
    assert again["status"] == "failed_resumable", again
    doc = Store(store).load_run(run_id)
    assert "Draft it well." in (doc.workflow_source or "")  # re-stamped by the replay

    # iteration 2: edit review's prompt; the draft edit is not re-reported
    bot.write_text(bot.read_text().replace("Review it.", "Review it strictly."))
    (repo / "chain.script.yaml").write_text(ANSWERS.replace("REVIEW", "ok"))
    r2 = cli_json(repo, store, "rewind", "--run-id", run_id, "--auto")
    assert r2["to_node"] == "review", r2["auto"]
    assert [c["node"] for c in r2["auto"]["candidates"]] == ["review"]
    assert all("p_draft" not in line for line in r2["auto"]["changes"])
    done = cli_json(repo, store, "resume", "--run-id", run_id, "--force")
    assert done["status"] == "finished", done
    assert (repo / "pub.txt").read_text() == "ok\n"


def test_cli_refusals_are_one_clear_line(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    doc = fake_run(Store(store), repo, loop_steps(), status=RunStatus.FINISHED)
    proc = run_cli("rewind", "--run-id", doc.id, "--node", "draft", cwd=repo, store=store)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: run {doc.id} is finished: a finished run cannot be rewound")
    proc = run_cli("rewind", "--run-id", "nope-not-a-run", "--node", "x", cwd=repo, store=store)
    assert proc.returncode == 2 and proc.stderr.startswith("error: run nope-not-a-run not found")
    # flag misuse is refused before the store is even opened
    runner = CliRunner()
    for extra in (["--node", "draft", "--auto"], []):
        result = runner.invoke(app, ["rewind", "--run-id", doc.id, *extra, "--store-dir", str(store)])
        assert isinstance(result.exception, CliError)
        assert "exactly one of --node NODE or --auto" in result.exception.message


def test_a_run_that_reached_the_fail_terminal_is_recovered_by_rewind(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    from .rewind_runs import FLOW

    (repo / "flow.bot").write_text(FLOW)
    (repo / "flow.script.yaml").write_text('draft:\n  "*": {output: {text: "good"}}\n')
    paused = cli_json(repo, store, "run", "flow.bot")
    run_id = paused["run_id"]
    failed = cli_json(repo, store, "resume", "--run-id", run_id, "--answer", "approved=false")
    assert failed["status"] == "failed", failed  # the graph abandoned it on purpose
    out = cli_json(repo, store, "rewind", "--run-id", run_id, "--node", "gate")
    assert out["status"] == "paused_operator" and out["to_node"] == "gate"
    # the replayed gate asks its question again
    again = cli_json(repo, store, "resume", "--run-id", run_id)
    assert again["status"] == "paused_waiting_human" and again["checkpoint_node"] == "gate", again
