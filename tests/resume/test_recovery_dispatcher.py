"""The recovery dispatcher (iterion/engine/recovery.py): in-run retries, recovery pauses, and the
codes it refuses to retry, through the engine API and the CLI. The in-run backoff is 0 here
(``ITERION_RETRY_BACKOFF_S`` in tests/conftest.py) unless a test sets its own base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from iterion.budget import BudgetAsk
from iterion.engine.errors import EngineError
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.recovery import Action, OnBudget, RecoveryPolicy, decide
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.engine.result import RunResult
from iterion.engine.auto_resume import Backoff
from iterion.failure_codes import TABLE, Retry
from iterion.store import AnchorReason, RunStatus, Store

from .conftest import cli, cli_json, events, write_bot

ONE_AGENT = """
schema verdict:
  ok: bool

agent call:
  backend: "script"
  output: verdict
  user: "go"

tool after:
  command: "echo after >> after.log"

workflow r:
  entry: call
  call -> after
  after -> done
"""


def _launch(store: Store, bot: Path, ws: Path, **kw: Any) -> RunResult:
    return launch_run(store, bot, LaunchOptions(workspace=ws, watch=False, **kw))


def _resume(store: Store, run_id: str, **kw: Any) -> RunResult:
    return resume_run(store, run_id, ResumeOptions(watch=False, **kw))


def _attempts(*entries: dict[str, Any]) -> dict[str, Any]:
    """A script answering ``call`` with ``entries`` in order across calls (the last repeats)."""
    return {"call": {"*": {"attempts": list(entries)}}}


def _err(code: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"scripted {code}", **extra}}


OK = {"output": {"ok": True}}


def _types(store: Store, run_id: str, *types: str) -> list[str]:
    return [e.type for e in store.read_events(run_id) if e.type in types]


# -- the decision, straight from the table ------------------------------------------------------------
def test_every_row_decides_once_per_attempt_from_the_table() -> None:
    policy = RecoveryPolicy(backoff=Backoff(base_s=1.0, max_s=30.0))
    for code, row in TABLE.items():
        first = decide(code.value, 1, origin="llm_verdict" if row.retry_origin.value == "llm_verdict" else "backend",
                       policy=policy)
        if row.retry in (Retry.DETERMINISTIC, Retry.AMBIGUOUS):
            assert first.action is Action.FAIL, code
        elif row.in_run_retries:
            assert first.action is Action.RETRY and first.delay_s == 1.0, code
            last = decide(code.value, row.in_run_retries + 1, origin=first.origin, policy=policy)
            assert last.action is not Action.RETRY and "exhausted" in last.reason, code
    assert decide("AMBIGUOUS_EFFECT", 1, policy=policy).reason.startswith("a repeat may duplicate a mutation")
    assert decide("MY_BOT_CODE", 1, policy=policy).reason == "not auto-recoverable (code MY_BOT_CODE)"
    # exponential, bounded, and a provider's longer retry_after honoured
    delays = [decide("RATE_LIMITED", n, policy=policy).delay_s for n in (1, 2, 3)]
    assert delays == [1.0, 2.0, 4.0]
    assert decide("RATE_LIMITED", 1, retry_after_s=7.5, policy=policy).delay_s == 7.5
    too_long = decide("RATE_LIMITED", 1, retry_after_s=3600, policy=policy)
    assert too_long.action is Action.FAIL and "ceiling" in too_long.reason
    # an origin the row does not name is not retried (EXECUTION_FAILED from the engine's plumbing)
    assert decide("EXECUTION_FAILED", 1, origin=None, policy=policy).action is Action.FAIL
    assert decide("SCHEMA_VALIDATION", 1, origin=None, policy=policy).action is Action.FAIL
    # pauses: AUTH_FAILED always (bounded), BUDGET_EXCEEDED only when opted in, never in a branch
    assert decide("AUTH_FAILED", 1, policy=policy).action is Action.PAUSE
    assert decide("AUTH_FAILED", policy.max_pauses + 1, policy=policy).action is Action.FAIL
    assert decide("AUTH_FAILED", 1, policy=policy, can_pause=False).action is Action.FAIL
    assert decide("BUDGET_EXCEEDED", 1, policy=policy).action is Action.FAIL
    paused = RecoveryPolicy(on_budget=OnBudget.PAUSE)
    assert decide("BUDGET_EXCEEDED", 1, policy=paused).action is Action.PAUSE


# -- in-run retries -----------------------------------------------------------------------------------
def test_rate_limited_once_then_ok_finishes_with_one_retry_recorded(tmp_path: Path, ws: Path,
                                                                    store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", ONE_AGENT, _attempts(_err("RATE_LIMITED", retry_after_s=0.05), OK))
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    assert r.outputs["call"] == {"ok": True} and (ws / "after.log").read_text() == "after\n"
    (retry,) = events(store_dir, r.run_id, "node_retry_scheduled")
    assert retry.node == "call" and retry.payload["code"] == "RATE_LIMITED" and retry.payload["attempt"] == 1
    assert retry.payload["delay_s"] == 0.05 and retry.payload["retry_after_s"] == 0.05  # the provider's wait
    assert store.load_checkpoint(r.run_id).recovery_attempt("call", "RATE_LIMITED") == 1
    assert _types(store, r.run_id, "node_failed", "node_retry_scheduled", "node_finished")[:3] == [
        "node_failed", "node_retry_scheduled", "node_finished"]
    # the retry re-entered the node through a resume: boundary, after the failure's fail: boundary
    labels = [e.payload["label"] for e in events(store_dir, r.run_id, "boundary_written")]
    assert labels[:4] == ["pre:call:0", "fail:call:0", "resume:call:0", "nodes:call:0"]


def test_retries_back_off_exponentially_then_the_failure_stands(tmp_path: Path, ws: Path, store_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_RETRY_BACKOFF_S", "0.01")
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", ONE_AGENT, _attempts(_err("NETWORK_TRANSIENT")))
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "NETWORK_TRANSIENT"
    scheduled = events(store_dir, r.run_id, "node_retry_scheduled")
    assert [e.payload["attempt"] for e in scheduled] == [1, 2, 3]
    assert [e.payload["delay_s"] for e in scheduled] == [0.01, 0.02, 0.04]
    (declined,) = events(store_dir, r.run_id, "recovery_declined")
    assert declined.payload["attempt"] == 4 and "exhausted" in declined.payload["reason"]
    assert len(events(store_dir, r.run_id, "node_started")) == 4
    assert not (ws / "after.log").exists()


def test_a_schema_verdict_from_a_model_keeps_its_retries(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", ONE_AGENT, _attempts({"output": {"ok": "maybe"}}, OK))
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    (retry,) = events(store_dir, r.run_id, "node_retry_scheduled")
    assert retry.payload["code"] == "SCHEMA_VALIDATION" and retry.payload["origin"] == "llm_verdict"


def test_deterministic_codes_are_not_retried(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", """
        schema probe:
          healthy: bool

        tool broken:
          command: "echo x >> tries.log; exit 3"

        tool check:
          command: `echo x >> checks.log; echo '{"healthy": "yes"}'`
          output: probe

        workflow d:
          entry: broken
          broken -> check
          check -> done
    """)
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "TOOL_FAILED_PERMANENT"
    assert (ws / "tries.log").read_text() == "x\n"  # executed once
    assert not events(store_dir, r.run_id, "node_retry_scheduled")
    (declined,) = events(store_dir, r.run_id, "recovery_declined")
    assert declined.payload["code"] == "TOOL_FAILED_PERMANENT" and "deterministic" in declined.payload["reason"]
    # a tool's output that does not match its schema is a warning, never a failure (dsl.md 2.7):
    # the run goes on to the next node, which fails as before
    bot2 = write_bot(tmp_path / "src2", (tmp_path / "src" / "wf.bot").read_text().replace("entry: broken",
                                                                                           "entry: check")
                     .replace("broken -> check", "check -> broken").replace("check -> done", "broken -> done"))
    r2 = _launch(store, bot2, ws)
    assert r2.failure_code == "TOOL_FAILED_PERMANENT" and (ws / "checks.log").read_text() == "x\n"
    (warned,) = [e for e in events(store_dir, r2.run_id, "warning") if e.payload.get("code") == "tool_output_mismatch"]
    assert warned.node == "check" and warned.payload["wrong_type"] == [{"field": "healthy", "expected": "bool",
                                                                        "got": "string"}]


def test_ambiguous_effect_is_never_retried(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", ONE_AGENT, _attempts(_err("AMBIGUOUS_EFFECT"), OK))
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "AMBIGUOUS_EFFECT"
    assert len(events(store_dir, r.run_id, "node_started")) == 1
    assert not events(store_dir, r.run_id, "node_retry_scheduled")
    (declined,) = events(store_dir, r.run_id, "recovery_declined")
    assert "reconcile" in declined.payload["reason"]


def test_a_branch_retries_in_run_but_cannot_pause(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", """
        schema verdict:
          ok: bool

        router spread:
          mode: fan_out_all

        agent left:
          backend: "script"
          output: verdict
          user: "l"

        agent right:
          backend: "script"
          output: verdict
          user: "r"

        tool join:
          command: "echo joined"
          await: wait_all

        workflow b:
          entry: spread
          spread -> left
          spread -> right
          left -> join
          right -> join
          join -> done
    """, {"left": {"*": {"attempts": [_err("RATE_LIMITED"), OK]}}, "right": {"*": {"attempts": [_err("AUTH_FAILED")]}}})
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "AUTH_FAILED"
    assert [e.node for e in events(store_dir, r.run_id, "node_retry_scheduled")] == ["left"]
    declined = events(store_dir, r.run_id, "recovery_declined")
    assert [e.node for e in declined] == ["right"] and "fan-out branch" in declined[0].payload["reason"]
    assert not events(store_dir, r.run_id, "recovery_paused")


# -- recovery pauses ----------------------------------------------------------------------------------
def test_auth_failed_parks_a_recovery_pause_and_the_cli_resume_reexecutes_the_node(
        tmp_path: Path, ws: Path, store_dir: Path) -> None:
    bot = write_bot(tmp_path / "src", ONE_AGENT, _attempts(_err("AUTH_FAILED"), _err("AUTH_FAILED"), OK))
    rc, run = cli_json("run", str(bot), cwd=ws, store=store_dir)
    assert rc == 4 and run["status"] == "paused_waiting_human", run
    assert run["failure_code"] == "AUTH_FAILED" and "scripted AUTH_FAILED" in run["error"]  # what it recovers from
    pending = run["pending"]
    assert pending["kind"] == "recovery" and pending["node"] == "call"
    assert pending["recovery_code"] == "AUTH_FAILED" and "scripted AUTH_FAILED" in pending["last_error"]
    assert "acknowledge_recovery" in pending
    rid = run["run_id"]
    store = Store(store_dir)
    cp = store.load_checkpoint(rid)
    assert cp.recovery_pause and cp.recovery_code == "AUTH_FAILED" and cp.anchor_reason is AnchorReason.RECOVERY_PAUSE
    assert cp.restart_node == "call" and cp.recovery_attempt("call", "AUTH_FAILED") == 1
    assert store.interactions(rid).load(cp.pending_interaction.id).kind == "recovery"
    labels = [e.payload["label"] for e in events(store_dir, rid, "boundary_written")]
    assert labels[-2:] == ["fail:call:0", "pause:call:0"]
    assert events(store_dir, rid, "recovery_paused")[0].payload["attempt"] == 1

    plain = cli("resume", "--run-id", rid, cwd=ws, store=store_dir)  # answers are required
    assert plain.returncode == 2 and "acknowledge_recovery" in plain.stderr, plain.stderr
    # the second identical failure is judged as the second attempt (the counter survived the pause)
    rc, again = cli_json("resume", "--run-id", rid, "--answer", "acknowledge_recovery=true", cwd=ws, store=store_dir)
    assert rc == 4 and again["pending"]["kind"] == "recovery", again
    assert [e.payload["attempt"] for e in events(store_dir, rid, "recovery_paused")] == [1, 2]
    resumed = events(store_dir, rid, "run_resumed")[-1].payload
    assert resumed["resumed_from"] == "recovery_pause" and resumed["recovery_code"] == "AUTH_FAILED"
    assert resumed["restart_node"] == "call"

    rc, done = cli_json("resume", "--run-id", rid, "--answer", "acknowledge_recovery=rotated", cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished", done
    assert done["outputs"]["call"] == {"ok": True}  # the node re-executed; the ack is not its output
    assert (ws / "after.log").read_text() == "after\n"
    final = store.load_checkpoint(rid)
    assert final.recovery_attempt("call", "AUTH_FAILED") == 2 and not final.recovery_pause
    answered = [i for i in store.interactions(rid).list() if i.kind == "recovery"]
    assert sorted(str(i.answers) for i in answered) == sorted(
        [str({"acknowledge_recovery": "true"}), str({"acknowledge_recovery": "rotated"})])
    assert len(events(store_dir, rid, "node_started")) == 4  # call x3, after x1


def test_budget_exceeded_pauses_only_when_the_launch_opts_in(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", """
        tool a:
          command: "echo a"

        tool b:
          command: "echo b >> b.log"

        workflow b:
          entry: a
          a -> b
          b -> done
    """)
    default = _launch(store, bot, ws, budget=BudgetAsk(max_iterations=1))
    assert default.status is RunStatus.FAILED_RESUMABLE and default.failure_code == "BUDGET_EXCEEDED"

    p = cli("run", str(bot), "--json", "--max-iterations", "1", "--on-budget", "pause", cwd=ws, store=store_dir)
    assert p.returncode == 4, p.stderr
    rid = json.loads(p.stdout)["run_id"]
    cp = store.load_checkpoint(rid)
    assert cp.recovery_pause and cp.recovery_code == "BUDGET_EXCEEDED" and cp.restart_node == "b"
    # acknowledged but the same cap: refused up front with the real cause, nothing executed
    same = cli("resume", "--run-id", rid, "--answer", "acknowledge_recovery=true", cwd=ws, store=store_dir)
    assert same.returncode == 2 and "BUDGET_EXCEEDED" in same.stderr and not (ws / "b.log").exists()
    rc, done = cli_json("resume", "--run-id", rid, "--answer", "acknowledge_recovery=true", "--max-iterations", "5",
                        cwd=ws, store=store_dir)
    assert rc == 0 and done["status"] == "finished" and (ws / "b.log").read_text() == "b\n"
    assert store.load_run(rid).options["on_budget"] == "pause"  # kept by every resume of the run
    with pytest.raises(EngineError, match="not waiting for answers"):
        _resume(store, default.run_id, answers={"acknowledge_recovery": "true"})


def test_a_cancel_during_the_backoff_parks_the_run_cancelled_at_the_node(
        tmp_path: Path, ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from iterion.engine.cancel import CancelToken

    monkeypatch.setenv("ITERION_RETRY_BACKOFF_S", "600")  # the wait only a cancel can end
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", ONE_AGENT, _attempts(_err("RATE_LIMITED"), OK))
    token = CancelToken()
    scheduled = threading.Event()
    out: list[RunResult] = []

    def listener(e: Any) -> None:
        if e.type == "node_retry_scheduled":
            scheduled.set()

    worker = threading.Thread(target=lambda: out.append(launch_run(
        store, bot, LaunchOptions(workspace=ws, watch=False), token=token, listener=listener)))
    worker.start()
    assert scheduled.wait(60)
    token.cancel("operator cancel")
    worker.join(60)
    (r,) = out
    assert r.status is RunStatus.CANCELLED and r.checkpoint_node == "call"
    assert len(events(store_dir, r.run_id, "node_started")) == 1  # the retry never started
    done = _resume(store, r.run_id)  # the resume re-executes the node: the script's next attempt answers
    assert done.status is RunStatus.FINISHED and done.outputs["call"] == {"ok": True}
