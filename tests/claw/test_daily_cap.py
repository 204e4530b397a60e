"""The store's daily spend cap, end to end: two runs of one store cross it at their charge points
over real HTTP (the scripted LLM), both park ``paused_operator`` with ``pause_reason: daily_cap``,
a resume is refused with the figures, and a raised cap resumes them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from iterion.engine.errors import EngineError
from iterion.store import RunStatus, Store
from iterion.store.jetstream import JetStreamStore
from iterion.store.spend import FileSpendCounter, resets_at, utc_day
from tests.natsserver import NatsServer

from ..conftest import make_checkout, run_cli, start_cli
from .conftest import agent_bot, calls, events, final, launch, resume
from .scripted_server import ScriptedLLM

# $0.01 an input token: each turn below (100 tokens in) costs exactly $1
PRICES = json.dumps({"test-model": [10000, 0]})
TURN = {"usage": {"in": 100, "out": 0}}


def turn(step: dict[str, object]) -> dict[str, object]:
    return {**step, **TURN}


@pytest.fixture
def priced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_MODEL_PRICES", PRICES)
    monkeypatch.setenv("ITERION_DAILY_COST_CAP_USD", "2.5")


def test_two_runs_park_at_the_cap_resume_is_refused_then_a_raised_cap_resumes_them(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, priced: None) -> None:
    (ws / "greet.txt").write_text("hello\n")
    bot = agent_bot(tmp_path / "src", "openai")
    read = calls(("read_file", {"path": "greet.txt"}))
    # run A: $1, $2, then $3 reaches the $2.5 cap at its third charge (the turn was spent: counted)
    llm.add(turn(read), turn(read), turn(read))
    a = launch(store, bot, ws)
    assert a.status is RunStatus.PAUSED_OPERATOR, a.error
    assert len(llm.requests) == 3  # parked at the charge point: no fourth call
    # run B (same store): its first charge ($1, $4 today) is over the cap already
    llm.add(turn(read))
    b = launch(store, bot, ws)
    assert b.status is RunStatus.PAUSED_OPERATOR, b.error
    assert len(llm.requests) == 4

    counter = FileSpendCounter(store.root)
    today = counter.today()
    assert today.spent_usd == pytest.approx(4.0) and today.charges == 4
    reset = resets_at(utc_day()).strftime("%Y-%m-%dT%H:%M:%SZ")
    for run in (a, b):
        paused = events(store, run.run_id, "run_paused")[-1].payload
        assert paused["pause_reason"] == "daily_cap" and paused["restart_node"] == "coder"
        assert paused["cap_usd"] == 2.5 and paused["resets_at"] == reset
        assert store.load_run(run.run_id).error.startswith("daily spend cap $2.5 reached")
    assert events(store, a.run_id, "run_paused")[-1].payload["spent_today_usd"] == pytest.approx(3.0)
    assert store.load_checkpoint(a.run_id).accounting.cost_usd == pytest.approx(3.0)  # the run's own usage too

    # resume under the same cap: refused with the cap, today's spend and the reset; nothing moved
    with pytest.raises(EngineError) as refused:
        resume(store, a.run_id)
    assert "daily spend cap $2.5 reached: $4 spent today" in refused.value.message
    assert f"resets {reset}" in refused.value.message
    cli = run_cli("resume", "--run-id", b.run_id, store=store.root,
                  env={"ITERION_DAILY_COST_CAP_USD": "2.5", "ITERION_MODEL_PRICES": PRICES})
    assert cli.returncode == 2, cli.stderr
    first = cli.stderr.strip().splitlines()[0]
    assert first.startswith("error: ") and "$2.5" in first and "$4 spent today" in first and reset in first
    assert "--max-daily-cost-usd" in cli.stderr
    assert store.load_run(b.run_id).status is RunStatus.PAUSED_OPERATOR
    assert len(llm.requests) == 4 and counter.today().charges == 4

    # a raised cap resumes both (the node re-executes from its start)
    llm.add(turn(final("a done")))
    ra = resume(store, a.run_id, max_daily_cost_usd=10)
    assert ra.status is RunStatus.FINISHED, ra.error
    llm.add(turn(final("b done")))
    rb = resume(store, b.run_id, max_daily_cost_usd=10)
    assert rb.status is RunStatus.FINISHED, rb.error
    assert rb.outputs["coder"]["summary"] == "b done"
    assert counter.today().spent_usd == pytest.approx(6.0)
    resumed = events(store, a.run_id, "run_resumed")[-1].payload
    assert resumed["from_status"] == "paused_operator" and resumed["daily_cap_usd"] == 10


def test_a_raised_setting_resumes_and_no_cap_counts_without_parking(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM, priced: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "greet.txt").write_text("hello\n")
    bot = agent_bot(tmp_path / "src", "openai")
    llm.add(turn(calls(("read_file", {"path": "greet.txt"}))), turn(calls(("read_file", {"path": "greet.txt"}))),
            turn(calls(("read_file", {"path": "greet.txt"}))))
    r = launch(store, bot, ws)
    assert r.status is RunStatus.PAUSED_OPERATOR
    monkeypatch.setenv("ITERION_DAILY_COST_CAP_USD", "4.5")  # the setting raised: $3, then $4 < $4.5
    llm.add(turn(final("done")))
    assert resume(store, r.run_id).status is RunStatus.FINISHED
    monkeypatch.delenv("ITERION_DAILY_COST_CAP_USD")  # no cap: still counted, nothing parks
    llm.add(turn(final("again")))
    assert launch(store, bot, ws).status is RunStatus.FINISHED
    assert FileSpendCounter(store.root).today().spent_usd == pytest.approx(5.0)


def test_a_garbage_cap_setting_is_refused_before_the_run_exists(tmp_path: Path, ws: Path, store: Store,
                                                                llm: ScriptedLLM,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_DAILY_COST_CAP_USD", "lots")
    bot = agent_bot(tmp_path / "src", "openai")
    proc = run_cli("run", str(bot), "--store-dir", str(store.root), cwd=ws,
                   env={"ITERION_DAILY_COST_CAP_USD": "lots"})
    assert proc.returncode == 2
    assert "$ITERION_DAILY_COST_CAP_USD='lots' is not an amount in USD >= 0" in proc.stderr
    assert not store.list_runs()


def test_the_counter_is_shared_through_jetstream(tmp_path: Path, ws: Path, llm: ScriptedLLM, priced: None,
                                                 nats_server: NatsServer) -> None:
    """Two machines (own store directories, one JetStream prefix): the spend of one parks the run
    of the other at its first charge, and the refusal there names the shared figures."""
    (ws / "greet.txt").write_text("hello\n")
    bot = agent_bot(tmp_path / "src", "openai")
    read = calls(("read_file", {"path": "greet.txt"}))
    prefix = "dc" + uuid.uuid4().hex[:8]
    with JetStreamStore(nats_server.url, prefix=prefix, timeout_s=10) as docs1, \
            JetStreamStore(nats_server.url, prefix=prefix, timeout_s=10) as docs2:
        one, two = Store(tmp_path / "machine-1", docs=docs1), Store(tmp_path / "machine-2", docs=docs2)
        llm.add(turn(read), turn(read), turn(read))
        a = launch(one, bot, ws)
        assert a.status is RunStatus.PAUSED_OPERATOR, a.error
        llm.add(turn(read))
        b = launch(two, bot, ws)
        assert b.status is RunStatus.PAUSED_OPERATOR, b.error
        assert events(two, b.run_id, "run_paused")[-1].payload["spent_today_usd"] == pytest.approx(4.0)
        assert not (tmp_path / "machine-1" / "spend").exists()  # the counter is in JetStream
        assert docs2.spend_counter().today().charges == 4
        with pytest.raises(EngineError) as refused:
            resume(two, a.run_id)
        assert "$4 spent today" in refused.value.message
        llm.add(turn(final("a done")))
        assert resume(two, a.run_id, max_daily_cost_usd=6).status is RunStatus.FINISHED
        llm.add(turn(final("b done")))  # $6 now: at a $6 cap the run would park again
        with pytest.raises(EngineError):
            resume(one, b.run_id, max_daily_cost_usd=5)
        assert resume(one, b.run_id, max_daily_cost_usd=7).status is RunStatus.FINISHED
        assert docs1.spend_counter().today().spent_usd == pytest.approx(6.0)


def test_the_cli_parks_with_exit_8_prints_the_raising_resume_and_resumes_under_it(
        tmp_path: Path, ws: Path, store: Store, llm: ScriptedLLM) -> None:
    (ws / "greet.txt").write_text("hello\n")
    bot = agent_bot(tmp_path / "src", "openai")
    read = turn(calls(("read_file", {"path": "greet.txt"})))
    env: dict[str, str | None] = {"OPENAI_BASE_URL": llm.openai_url, "ITERION_MODEL_PRICES": PRICES,
                                  "ITERION_DAILY_COST_CAP_USD": "1.5", "ITERION_BACKEND": None,
                                  "ITERION_DEFAULT_BACKEND": None}
    llm.add(read, read)
    run = run_cli("run", str(bot), "--json", store=store.root, cwd=ws, env=env)
    assert run.returncode == 8, run.stderr
    out = json.loads(run.stdout)
    assert out["status"] == "paused_operator" and out["error"].startswith("daily spend cap $1.5 reached: $2 spent")
    human = run_cli("inspect", "--run-id", out["run_id"], store=store.root, cwd=ws, env=env)
    assert "--max-daily-cost-usd 4" in human.stdout + human.stderr  # twice today's spend
    llm.add(turn(final("done")))
    again = run_cli("resume", "--run-id", out["run_id"], "--max-daily-cost-usd", "4", "--json", store=store.root,
                    cwd=ws, env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "finished"
    assert FileSpendCounter(store.root).today().spent_usd == pytest.approx(3.0)


def test_two_concurrent_run_processes_both_park_and_no_charge_is_lost(tmp_path: Path, store: Store,
                                                                       llm: ScriptedLLM) -> None:
    """Two `iterion run` processes charging one store at the same time (each in its own checkout):
    both park at the cap, and the counter holds exactly the calls both timelines record."""
    bot = agent_bot(tmp_path / "src", "openai")
    llm.add({**turn(calls(("read_file", {"path": "README"}))), "repeat": True})  # an agent that never ends
    env: dict[str, str | None] = {"OPENAI_BASE_URL": llm.openai_url, "ITERION_MODEL_PRICES": PRICES,
                                  "ITERION_DAILY_COST_CAP_USD": "6", "ITERION_BACKEND": None,
                                  "ITERION_DEFAULT_BACKEND": None}
    checkouts = [make_checkout(tmp_path / f"ws{i}") for i in range(2)]
    procs = [start_cli("run", str(bot), "--json", "--store-dir", str(store.root), cwd=c, env=env) for c in checkouts]
    outs = [p.communicate(timeout=120) for p in procs]
    runs = []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 8, err
        runs.append(json.loads(out)["run_id"])
    calls_made = sum(len(events(store, r, "backend_call")) for r in runs)
    today = FileSpendCounter(store.root).today()
    assert today.charges == calls_made == len(llm.requests)  # every call counted, none twice
    assert today.spent_usd == pytest.approx(calls_made)
    # the cap stops spending: past it, at most the call each run had in flight
    assert 6 <= today.spent_usd <= 6 + 1
    for r in runs:
        assert events(store, r, "run_paused")[-1].payload["pause_reason"] == "daily_cap"
