"""Resume pieces through the engine API (fast): fork, stale promotion, worktree links, answers,
operator requests, and the auto-resume verdicts read from the one failure-code table."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from iterion.budget import BudgetAsk
from iterion.engine.answers import stage_file_answers, upload_path
from iterion.engine.auto_resume import Backoff, auto_resume, verdict_for
from iterion.engine.control import Action, read_request, write_request
from iterion.engine.operator_verbs import cancel_run, pause_run
from iterion.engine.errors import EngineError
from iterion.engine.fork import fork_run, list_turns
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.result import RunResult
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.engine.stale import promote_if_orphaned, reconcile_orphans
from iterion.failure_codes import FailureCode
from iterion.ir import FieldType, Schema, SchemaField
from iterion.store import RunDoc, RunStatus, Store, StoreError
from iterion.store.ids import new_id

from .conftest import cli_json, write_bot


def _launch(store: Store, bot: Path, ws: Path, **kw: object) -> RunResult:
    return launch_run(store, bot, LaunchOptions(workspace=ws, watch=False, **kw))  # type: ignore[arg-type]


def _resume(store: Store, run_id: str, **kw: object) -> RunResult:
    return resume_run(store, run_id, ResumeOptions(watch=False, **kw))  # type: ignore[arg-type]


AGENTS = """
schema text:
  body: string

tool prep:
  command: "echo prep >> prep.log"

agent draft:
  backend: "script"
  output: text
  user: "write"

agent polish:
  backend: "script"
  output: text
  user: "polish {{outputs.draft.body}}"

workflow w:
  entry: prep
  prep -> draft
  draft -> polish
  polish -> done
"""
SCRIPT = {"draft": {"*": {"output": {"body": "v1"}}}, "polish": {"*": {"output": {"body": "polished"}}}}


def test_fork_creates_a_child_from_an_llm_turn_and_leaves_the_original_untouched(
        tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", AGENTS, SCRIPT)
    parent = _launch(store, bot, ws)
    assert parent.status is RunStatus.FINISHED, parent.error
    assert list_turns(store, parent.run_id) == {"draft": [0], "polish": [0]}  # LLM nodes only
    before = {p.relative_to(store.run_dir(parent.run_id)): p.read_bytes()
              for p in store.run_dir(parent.run_id).rglob("*") if p.is_file()}

    with pytest.raises(EngineError, match="no turn checkpoint for node prep") as refused:
        fork_run(store, parent.run_id, "prep")
    assert "rewind" not in (refused.value.hint or "")  # a finished run cannot be rewound: not offered
    rc, forked = cli_json("fork", "--run-id", parent.run_id, "--node", "draft", cwd=ws, store=store_dir)
    assert rc == 0 and forked["parent_run_id"] == parent.run_id and forked["status"] == "paused_operator"
    child = forked["run_id"]
    assert child != parent.run_id
    cp = store.load_checkpoint(child)
    assert cp.restart_node == "draft" and set(cp.outputs) == {"prep"}
    assert store.load_run(child).options["forked_from"] == {"run_id": parent.run_id, "node": "draft", "iteration": 0}

    (tmp_path / "src" / "wf.script.yaml").write_text('draft: {"*": {output: {body: "v2"}}}\n'
                                                       'polish: {"*": {output: {body: "alt"}}}\n')
    done = _resume(store, child)
    assert done.status is RunStatus.FINISHED, done.error
    assert done.outputs["draft"] == {"body": "v2"} and done.outputs["polish"] == {"body": "alt"}
    assert (ws / "prep.log").read_text() == "prep\n"  # the fork did not re-run what preceded the turn
    after = {p.relative_to(store.run_dir(parent.run_id)): p.read_bytes()
             for p in store.run_dir(parent.run_id).rglob("*") if p.is_file()}
    assert after == before  # original untouched, byte for byte


GATE = """
schema ok:
  approved: bool

tool one:
  command: "echo one > one.txt"

human approve:
  output: ok

workflow g:
  entry: one
  one -> approve
  approve -> done
"""


def test_worktree_whose_gitdir_vanished_is_refused_explicitly(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", GATE.replace("  entry: one", "  entry: one\n  worktree: auto"))
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
    doc = store.load_run(r.run_id)
    assert doc.worktree is not None and (Path(doc.worktree.path) / ".git").is_file()
    ws.rename(tmp_path / "moved-away")  # the repository that registered the worktree is gone
    with pytest.raises(EngineError, match="naming gitdir .* which no longer exists"):
        _resume(store, r.run_id, answers={"approved": "true"})
    assert store.load_run(r.run_id).status is RunStatus.PAUSED_WAITING_HUMAN


def _orphan(store: Store, *, checkpoint: bool) -> str:
    rid = new_id()
    store.create_run(RunDoc(id=rid, name="orphan", workflow_name="w", status=RunStatus.RUNNING))
    store.events(rid).append("run_started")
    if checkpoint:
        from iterion.store import Checkpoint
        store.save_checkpoint(rid, Checkpoint(restart_node="b"))
    return rid


def test_stale_running_runs_are_promoted_not_restarted(store_dir: Path) -> None:
    store = Store(store_dir)
    with_cp, without_cp, live = _orphan(store, checkpoint=True), _orphan(store, checkpoint=False), \
        _orphan(store, checkpoint=True)
    holder = store.lock(live)
    assert holder.try_acquire()  # a live owner
    try:
        assert reconcile_orphans(store) == []  # the 60 s grace window: just flushed, nothing promoted
        promoted = {p.run_id: p for p in reconcile_orphans(store, threshold_s=0)}
    finally:
        holder.release()
    assert set(promoted) == {with_cp, without_cp}
    doc = store.load_run(with_cp)
    assert doc.status is RunStatus.FAILED_RESUMABLE and doc.failure_code == FailureCode.ORPHANED_RUN.value
    assert promoted[with_cp].restart_node == "b"
    assert store.load_run(without_cp).status is RunStatus.FAILED
    assert store.load_run(live).status is RunStatus.RUNNING
    ev = store.read_events(with_cp)[-1]
    assert ev.type == "run_orphan_promoted" and ev.payload["to_status"] == "failed_resumable"
    assert promote_if_orphaned(store, with_cp, threshold_s=0) is None  # no longer running


def test_answers_at_prefix_only_for_file_fields_and_missing_upload(tmp_path: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    rid = new_id()
    store.create_run(RunDoc(id=rid, name="a", workflow_name="w", status=RunStatus.PAUSED_WAITING_HUMAN))
    (tmp_path / "song.mp3").write_bytes(b"ID3")
    schema = Schema("s", (SchemaField("music", FieldType.FILE), SchemaField("handle", FieldType.STRING)))
    out = stage_file_answers(store, rid, "gate", schema, {"music": "@song.mp3", "handle": "@octocat"}, cwd=tmp_path)
    assert Path(out["music"]).read_bytes() == b"ID3" and out["handle"] == "@octocat"
    assert upload_path("@@x") is None and upload_path("plain") is None and upload_path("@a/b") == Path("a/b")
    with pytest.raises(StoreError, match="not a readable file"):
        stage_file_answers(store, rid, "gate", schema, {"music": "@nope.mp3"}, cwd=tmp_path)


def test_missing_upload_is_refused_before_the_run_is_claimed(tmp_path: Path, ws: Path, store_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", """
        schema upload:
          doc: file

        human gate:
          output: upload

        workflow u:
          entry: gate
          gate -> done
    """)
    r = _launch(store, bot, ws)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EngineError, match="answer doc=@missing.txt"):
        _resume(store, r.run_id, answers={"doc": "@missing.txt"})
    assert store.load_run(r.run_id).status is RunStatus.PAUSED_WAITING_HUMAN


def test_cancel_and_pause_requests_through_the_api(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", GATE)
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    with pytest.raises(StoreError, match="only a running run can be paused"):
        pause_run(store, r.run_id)
    out = cancel_run(store, r.run_id)  # no live process: the status just moves
    assert out.delivered == "direct" and store.load_run(r.run_id).status is RunStatus.CANCELLED
    assert cancel_run(store, r.run_id).message == "already cancelled"
    # a request left from before an execution started is not for it
    write_request(store, r.run_id, Action.PAUSE, "stale request")
    resumed = _resume(store, r.run_id)
    assert resumed.status is RunStatus.PAUSED_WAITING_HUMAN  # re-asked: a cancel does not answer the gate
    assert read_request(store, r.run_id) is None


def test_pause_request_parks_at_the_node_about_to_execute(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", """
        tool one:
          command: "touch one.started; while [ ! -f go.flag ]; do sleep 0.02; done; echo one"

        tool two:
          command: "echo two > two.txt"

        workflow p:
          entry: one
          one -> two
          two -> done
    """)
    rid = new_id()
    box: dict[str, RunResult] = {}
    t = threading.Thread(target=lambda: box.setdefault("r", _launch(store, bot, ws, run_id=rid)))
    t.start()
    try:
        while not (ws / "one.started").exists():  # the node is executing: the pause waits for its end
            t.join(0.01)
        write_request(store, rid, Action.PAUSE, "paused by test")
    finally:
        (ws / "go.flag").write_text("")
        t.join(60)
    r = box["r"]
    assert r.status is RunStatus.PAUSED_OPERATOR and r.checkpoint_node == "two"
    assert not (ws / "two.txt").exists() and read_request(store, rid) is None
    done = _resume(store, rid)
    assert done.status is RunStatus.FINISHED and (ws / "two.txt").exists()


def _result(code: str | None, status: RunStatus = RunStatus.FAILED_RESUMABLE) -> RunResult:
    return RunResult(run_id="r", name="n", status=status, failure_code=code, error=f"boom {code}")


def test_auto_resume_verdicts_come_from_the_one_table(store_dir: Path) -> None:
    store = Store(store_dir)
    rid = new_id()
    store.create_run(RunDoc(id=rid, name="v", workflow_name="w", status=RunStatus.FAILED_RESUMABLE))

    def verdict(code: str) -> tuple[bool, str]:
        v = verdict_for(store, RunResult(run_id=rid, name="v", status=RunStatus.FAILED_RESUMABLE, failure_code=code))
        return v.allowed, v.message

    for code in ("EXECUTION_FAILED", "TIMEOUT", "RATE_LIMITED", "USAGE_LIMIT_BLOCKED", "NETWORK_TRANSIENT",
                 "TOOL_FAILED_TRANSIENT"):
        assert verdict(code)[0], code
    for code in ("EXPRESSION_FAILED", "CONTEXT_LENGTH_EXCEEDED", "IR_UNLOADABLE", "BOT_REQUIRES_NEWER_ENGINE",
                 "WORKSPACE_SAFETY", "TOOL_FAILED_PERMANENT", "AMBIGUOUS_EFFECT", "BUDGET_EXCEEDED"):
        allowed, message = verdict(code)
        assert not allowed and f"not auto-recoverable (code {code})" in message, code
    assert verdict("MY_BOT_CODE") == (False, "not auto-recoverable (code MY_BOT_CODE)")
    # BUDGET_EXCEEDED becomes retryable once a larger cap than the one that stopped it is in force
    store.events(rid).append("budget_exceeded", payload={"axis": "max_cost_usd", "cap": 2.0, "consumed": 2.5})
    store.update_run(rid, lambda d: setattr(d, "budget", d.budget.model_copy(update={"max_cost_usd": 10.0})))
    assert verdict("BUDGET_EXCEEDED")[0]


def test_auto_resume_stops_after_n_attempts_with_bounded_backoff(store_dir: Path) -> None:
    store = Store(store_dir)
    rid = new_id()
    store.create_run(RunDoc(id=rid, name="v", workflow_name="w", status=RunStatus.FAILED_RESUMABLE))
    calls: list[int] = []

    def again() -> RunResult:
        calls.append(1)
        return RunResult(run_id=rid, name="v", status=RunStatus.FAILED_RESUMABLE, failure_code="RATE_LIMITED")

    first = RunResult(run_id=rid, name="v", status=RunStatus.FAILED_RESUMABLE, failure_code="RATE_LIMITED")
    out = auto_resume(store, first, 3, resume=again, backoff=Backoff(base_s=0.001, factor=10, max_s=0.05),
                      log=lambda _m: None)
    assert out.status is RunStatus.FAILED_RESUMABLE and len(calls) == 3
    evs = store.read_events(rid)
    delays = [e.payload["delay_s"] for e in evs if e.type == "run_retry_scheduled"]
    assert delays == [0.001, 0.01, 0.05]  # exponential, capped
    assert evs[-1].type == "run_retry_skipped" and evs[-1].payload["reason"] == "attempts_exhausted"
    assert Backoff().delay(20) == 60.0
    assert auto_resume(store, _result(None, RunStatus.FINISHED), 3, resume=again).status is RunStatus.FINISHED


def test_recovery_pause_resume_reexecutes_the_node_and_keeps_attempt_counters(
        tmp_path: Path, ws: Path, store_dir: Path) -> None:
    from iterion.store import AnchorReason, PendingInteraction

    store = Store(store_dir)
    bot = write_bot(tmp_path / "src", """
        tool first:
          command: "echo first >> first.log"

        tool call:
          command: "test -f credential.ok && echo called"

        workflow r:
          entry: first
          first -> call
          call -> done
    """)
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.FAILED_RESUMABLE and r.checkpoint_node == "call"
    # what the recovery dispatcher writes when it parks a failed node for a person
    questions = {"acknowledge_recovery": "fix the credential, then answer", "recovery_code": "AUTH_FAILED",
                 "last_error": r.error}
    inter = store.interactions(r.run_id).ask("call", questions, kind="recovery")
    cp = store.load_checkpoint(r.run_id)
    cp.anchor_reason, cp.recovery_pause, cp.recovery_code = AnchorReason.RECOVERY_PAUSE, True, "AUTH_FAILED"
    cp.pending_interaction = PendingInteraction(id=inter.id, node="call", kind="recovery", questions=questions)
    cp.bump_recovery_attempt("call", "AUTH_FAILED")
    store.save_checkpoint(r.run_id, cp)
    doc = store.load_run(r.run_id)
    doc.status = RunStatus.PAUSED_WAITING_HUMAN
    store.save_run(doc, doc.version)

    (ws / "credential.ok").write_text("")
    done = _resume(store, r.run_id, answers={"acknowledge_recovery": "rotated the key"})
    assert done.status is RunStatus.FINISHED, done.error
    assert done.outputs["call"]["stdout"] == "called\n"  # the node re-executed; the ack is not its output
    assert (ws / "first.log").read_text() == "first\n"
    resumed = [e for e in store.read_events(r.run_id) if e.type == "run_resumed"][-1].payload
    assert resumed["resumed_from"] == "recovery_pause" and resumed["recovery_code"] == "AUTH_FAILED"
    assert resumed["restart_node"] == "call"
    assert store.interactions(r.run_id).load(inter.id).answers == {"acknowledge_recovery": "rotated the key"}
    assert store.load_checkpoint(r.run_id).recovery_attempt("call", "AUTH_FAILED") == 1  # survived the pause


def test_budget_recovery_pause_without_a_raised_cap_is_refused_up_front(tmp_path: Path, ws: Path,
                                                                        store_dir: Path) -> None:
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
    r = _launch(store, bot, ws, budget=BudgetAsk(max_iterations=1))
    assert r.status is RunStatus.FAILED_RESUMABLE and r.failure_code == "BUDGET_EXCEEDED"
    cp = store.load_checkpoint(r.run_id)
    cp.recovery_pause, cp.recovery_code = True, "BUDGET_EXCEEDED"
    store.save_checkpoint(r.run_id, cp)
    with pytest.raises(EngineError, match="BUDGET_EXCEEDED"):
        _resume(store, r.run_id)
    assert not (ws / "b.log").exists()


def test_legacy_bare_digest_is_accepted_and_logged_on_every_resume(tmp_path: Path, ws: Path, store_dir: Path) -> None:
    from iterion.engine.source import compile_source

    store = Store(store_dir)
    src = tmp_path / "src"
    write_bot(src / "lib", """
        schema ok:
          approved: bool

        human one:
          output: ok

        human two:
          output: ok
    """, name="gates")
    bot = write_bot(src, """
        import "lib/gates.bot"

        workflow legacy:
          entry: one
          one -> two
          two -> done
    """)
    r = _launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_WAITING_HUMAN
    compiled = compile_source(bot)
    assert compiled.bare_digest != compiled.digest
    doc = store.load_run(r.run_id)
    doc.workflow_digest = compiled.bare_digest  # what a launch before the unit entered the digest recorded
    store.save_run(doc, doc.version)
    assert _resume(store, r.run_id, answers={"approved": "true"}).status is RunStatus.PAUSED_WAITING_HUMAN
    assert _resume(store, r.run_id, answers={"approved": "true"}).status is RunStatus.FINISHED  # no --force
    accepted = [e for e in store.read_events(r.run_id) if e.type == "source_change_accepted"]
    assert len(accepted) == 2  # logged on every resume
    assert store.load_run(r.run_id).workflow_digest == compiled.bare_digest  # the run keeps what it recorded


FAN_OUT_FAIL = """
schema merged:
  count: int

schema gate:
  over: bool

router spread:
  mode: fan_out_all

tool one:
  command: "echo one"

tool check:
  output: gate
  command: `echo '{"over": true}'`

fail refuse:
  code: LOT_REFUSED
  message: "branch refused"
  resumable: true

compute join:
  await: {mode}
  output: merged
  expr:
    count: "1"

workflow fo:
  entry: spread
  spread -> one
  spread -> check
  one -> join
  check -> refuse when over
  check -> join when not over
  join -> done
"""


def test_fail_node_inside_a_fan_out_branch_is_the_branch_error_and_the_collector_decides(
        tmp_path: Path, ws: Path, store_dir: Path) -> None:
    store = Store(store_dir)
    strict = _launch(store, write_bot(tmp_path / "a", FAN_OUT_FAIL.replace("{mode}", "wait_all")), ws)
    assert strict.status is RunStatus.FAILED_RESUMABLE and strict.failure_code == "LOT_REFUSED"
    assert "branch -> check failed: branch refused" in strict.error and strict.checkpoint_node == "spread"
    branch = [e for e in store.read_events(strict.run_id) if e.type == "branch_failed"]
    assert branch and branch[0].payload["code"] == "LOT_REFUSED"
    lenient = _launch(store, write_bot(tmp_path / "b", FAN_OUT_FAIL.replace("{mode}", "best_effort")), ws)
    assert lenient.status is RunStatus.FINISHED, lenient.error
