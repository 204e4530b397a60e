"""The resume overrides and failure paths of the issue's acceptance list, through the CLI in subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

from iterion.store import RunStatus, Store

from .conftest import cli, cli_json, events, executed, start_cli, wait_for_file, write_bot

FAST_RETRY = {"ITERION_AUTO_RESUME_BACKOFF_S": "0.01"}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_two_concurrent_resumes_exactly_one_executes(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool check:
          command: "test -f ok.flag && echo started > check.started && while [ ! -f go.flag ]; do sleep 0.02; done && echo ran >> check.log"

        workflow w:
          entry: check
          check -> done
    """)
    rc, run = cli_json("run", str(bot), cwd=ws, store=store_dir)
    assert rc == 5
    (ws / "ok.flag").write_text("")
    first = start_cli("resume", "--run-id", run["run_id"], cwd=ws, store=store_dir)
    wait_for_file(ws / "check.started", first)
    second = cli("resume", "--run-id", run["run_id"], cwd=ws, store=store_dir)
    (ws / "go.flag").write_text("")
    _out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert second.returncode == 2 and "being executed by another process" in second.stderr, second.stderr
    assert _lines(ws / "check.log") == 1
    assert len(events(store_dir, run["run_id"], "run_resumed")) == 1


GATE = """
schema approval:
  approved: bool

human approve:
  output: approval
  instructions: "ok?"

tool ship:
  command: "echo shipped-v1 > shipped.txt"

workflow gate:
  entry: approve
  approve -> ship when approved
  approve -> done when not approved
  ship -> done
"""


def test_digest_mismatch_is_refused_with_both_digests_unless_forced(tmp_path: Path, ws: Path,
                                                                      store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", GATE)
    rc, run = cli_json("run", str(bot), cwd=ws, store=store_dir)
    assert rc == 4
    recorded = Store(store_dir).load_run(run["run_id"]).workflow_digest
    bot.write_text(bot.read_text().replace("shipped-v1", "shipped-v2"))
    refused = cli("resume", "--run-id", run["run_id"], "--answer", "approved=true", cwd=ws, store=store_dir)
    assert refused.returncode == 2 and recorded[:12] in refused.stderr and "--force" in refused.stderr
    from iterion.engine.source import compile_source
    assert compile_source(bot).digest[:12] in refused.stderr  # both digests shown
    doc = Store(store_dir).load_run(run["run_id"])
    assert doc.status is RunStatus.PAUSED_WAITING_HUMAN and not (ws / "shipped.txt").exists()  # nothing executed
    rc, done = cli_json("resume", "--run-id", run["run_id"], "--answer", "approved=true", "--force", cwd=ws,
                        store=store_dir)
    assert rc == 0 and done["status"] == "finished"
    assert (ws / "shipped.txt").read_text() == "shipped-v2\n"


def test_budget_cap_same_cap_refused_higher_cap_continues_and_accounting_is_kept(
        tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool a:
          command: "echo a >> a.log"

        tool b:
          command: "echo b >> b.log"

        tool c:
          command: "echo c >> c.log"

        workflow capped:
          entry: a
          a -> b
          b -> c
          c -> done
    """)
    rc, run = cli_json("run", str(bot), "--max-iterations", "2", "--max-cost-usd", "5", cwd=ws, store=store_dir)
    assert rc == 5 and run["failure_code"] == "BUDGET_EXCEEDED" and run["checkpoint_node"] == "c"
    rid = run["run_id"]
    consumed = Store(store_dir).load_checkpoint(rid).accounting.iterations
    same = cli("resume", "--run-id", rid, cwd=ws, store=store_dir)
    assert same.returncode == 2 and "BUDGET_EXCEEDED" in same.stderr and "max_iterations" in same.stderr, same.stderr
    not_above = cli("resume", "--run-id", rid, "--max-iterations", str(consumed), cwd=ws, store=store_dir)
    assert not_above.returncode == 2 and "already consumed" in not_above.stderr, not_above.stderr
    assert Store(store_dir).load_run(rid).status is RunStatus.FAILED_RESUMABLE  # refused up front
    rc, done = cli_json("resume", "--run-id", rid, "--max-iterations", "10", cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished", done
    assert (_lines(ws / "a.log"), _lines(ws / "b.log"), _lines(ws / "c.log")) == (1, 1, 1)
    store = Store(store_dir)
    assert store.load_checkpoint(rid).accounting.iterations == consumed + 1  # not reset
    ask = store.load_run(rid).budget
    assert ask.max_iterations == 10 and ask.max_cost_usd == 5  # merged per field and persisted


GUARD = """
schema gate:
  over: bool

tool spend:
  command: "echo spend >> spend.log"

tool guard:
  output: gate
  language: python
  script:
    import json, os
    print(json.dumps({"over": float(os.environ["ITERION_BUDGET_MAX_COST_USD"]) < 5}))

fail too_costly:
  code: PHASE_BUDGET
  message: "phase budget too small"
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


def test_resumable_fail_node_resume_with_raised_cap_takes_the_other_edge(tmp_path: Path, ws: Path,
                                                                          store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", GUARD)
    p = cli("run", str(bot), "--json", "--auto-resume", "3", cwd=ws, store=store_dir, env=FAST_RETRY)
    run = json.loads(p.stdout)
    assert p.returncode == 5 and run["failure_code"] == "PHASE_BUDGET" and run["checkpoint_node"] == "guard"
    # a bot-defined code is never retried automatically, and says so
    assert "not auto-recoverable (code PHASE_BUDGET)" in p.stderr
    skipped = events(store_dir, run["run_id"], "run_retry_skipped")
    assert [e.payload["code"] for e in skipped] == ["PHASE_BUDGET"] and skipped[0].payload["reason"] == "deterministic"
    assert not events(store_dir, run["run_id"], "run_retry_scheduled")
    rc, done = cli_json("resume", "--run-id", run["run_id"], "--max-cost-usd", "10", cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished" and (ws / "finished.txt").exists()
    assert _lines(ws / "spend.log") == 1
    assert executed(store_dir, run["run_id"]).count("guard:0") == 1 and "guard:1" in executed(store_dir, run["run_id"])


def test_auto_resume_retries_a_transient_code_with_backoff_events(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    # exits 75 (EX_TEMPFAIL -> TOOL_FAILED_TRANSIENT) on its first five attempts: the recovery
    # dispatcher's 3 in-run retries take four of them (its per-(node, code) counter survives the
    # resumes, so a resumed run gets no new in-run retries), auto-resume the rest
    bot = write_bot(tmp_path / "src", """
        tool flaky:
          command: "echo x >> tries.log; test $(wc -l < tries.log) -ge 6 || exit 75"

        workflow f:
          entry: flaky
          flaky -> done
    """)
    rc, run = cli_json("run", str(bot), "--auto-resume", "3", cwd=ws, store=store_dir, env=FAST_RETRY)
    assert rc == 0 and run["status"] == "finished", run
    scheduled = events(store_dir, run["run_id"], "run_retry_scheduled")
    assert [e.payload["attempt"] for e in scheduled] == [1, 2]
    assert all(e.payload["code"] == "TOOL_FAILED_TRANSIENT" for e in scheduled)
    assert scheduled[1].payload["delay_s"] == 2 * scheduled[0].payload["delay_s"]  # exponential
    assert _lines(ws / "tries.log") == 6
    assert [e.payload["attempt"] for e in events(store_dir, run["run_id"], "node_retry_scheduled")] == [1, 2, 3]


def test_auto_resume_declines_a_deterministic_engine_code(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool broken:
          command: "exit 3"

        workflow d:
          entry: broken
          broken -> done
    """)
    p = cli("run", str(bot), "--json", "--auto-resume", "5", cwd=ws, store=store_dir, env=FAST_RETRY)
    run = json.loads(p.stdout)
    assert p.returncode == 5 and run["failure_code"] == "TOOL_FAILED_PERMANENT"
    (skipped,) = events(store_dir, run["run_id"], "run_retry_skipped")
    assert skipped.payload["reason"] == "deterministic" and skipped.payload["code"] == "TOOL_FAILED_PERMANENT"
    assert "exited with status 3" in skipped.payload["error"]
    assert not events(store_dir, run["run_id"], "run_retry_scheduled")
    assert "not auto-recoverable (code TOOL_FAILED_PERMANENT)" in p.stderr


def test_resume_help_documents_every_flag_with_an_example(ws: Path, store_dir: Path) -> None:
    p = cli("resume", "--help", cwd=ws, store=store_dir, env={"COLUMNS": "400"})
    assert p.returncode == 0
    flags = ["--run-id", "--answer", "--answers-file", "--file", "--force", "--force-stale", "--auto-resume",
             "--backend", "--script", "--max-cost-usd", "--max-tokens", "--max-duration", "--max-iterations",
             "--max-parallel-branches", "--store-dir", "--json"]
    option_lines: list[str] = []  # one entry per option, its wrapped help lines joined
    for ln in p.stdout.splitlines():
        text = ln.strip("│ *")
        if text.startswith("--"):
            option_lines.append(text)
        elif option_lines and text and ln.startswith("    "):
            option_lines[-1] += " " + text
    for flag in flags:
        (line,) = [ln for ln in option_lines if ln.split()[0] == flag]
        assert "Example:" in line, line
    assert "iterion resume --run-id" in p.stdout
