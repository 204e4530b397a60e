"""Each disposition of the queue, decided from the failure-code table, with a runner in this process
claiming from a real nats-server (JetStream store + work queue)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iterion.failure_codes import FailureCode, row_for
from iterion.queue import policy
from iterion.queue.delivery import Delivery, Kind
from iterion.queue.publish import queue_launch
from iterion.runner.loop import Runner, RunnerConfig
from iterion.store import RunStatus
from tests.queue.conftest import Cluster, counts, wait_for


class Live:
    def __init__(self, cluster: Cluster, tmp_path: Path) -> None:
        self.cluster, self.tmp_path = cluster, tmp_path
        self.store, self.queue = cluster.store(), cluster.queue(max_deliver=3)
        self.lines: list[str] = []
        self.runner = Runner(cluster.store(), cluster.queue(max_deliver=3),
                             RunnerConfig(work_dir=tmp_path / "work", name="inproc", grace_s=2),
                             say=self.lines.append)
        self.thread = threading.Thread(target=self.runner.serve, daemon=True)
        self.thread.start()

    def launch(self, forge: Path, mode: str, i: int = 0) -> tuple[str, Path]:
        count_dir = self.tmp_path / f"c-{mode}-{i}"
        count_dir.mkdir()
        doc, _ = queue_launch(self.store, self.queue, request_id=f"{mode}-{i}", file="outcomes.bot",
                              repo_url=str(forge), ref="main",
                              vars={"mode": mode, "count_dir": str(count_dir)})
        return doc.id, count_dir

    def disposed(self, run_id: str, n: int = 1) -> list[str]:
        def done() -> list[str] | None:
            mine = [ln for ln in self.lines if run_id in ln and not ln.startswith("claim")]
            return mine if len(mine) >= n else None
        return wait_for(done, f"{n} disposition(s) of {run_id}: {self.lines}", timeout=90)

    def events(self, run_id: str, kind: str) -> list[Any]:
        return [e for e in self.store.read_events(run_id) if e.type == kind]

    def stop(self) -> None:
        self.runner.stop()
        self.thread.join(30)


@pytest.fixture
def live(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    monkeypatch.setenv(policy.DELAY_SCALE_ENV, "0.01")
    monkeypatch.setenv("ITERION_RETRY_BACKOFF_S", "0")
    lv = Live(cluster, tmp_path)
    yield lv
    lv.stop()


def test_a_deliberate_failure_is_acked_and_not_redelivered(live: Live, forge: Path) -> None:
    run_id, cdir = live.launch(forge, "deliberate")
    (line,) = live.disposed(run_id)
    assert line.startswith("ack ") and "deliberate_failure" in line
    doc = live.store.load_run(run_id)
    assert (doc.status, doc.failure_code) == (RunStatus.FAILED, "LOT_NOT_ACTIONABLE")
    assert len(live.events(run_id, "run_delivery_claimed")) == 1
    assert not live.events(run_id, "run_retry_scheduled")
    assert live.queue.status()["deliveries"] == []


def test_a_bot_defined_code_keeps_its_code_and_a_redelivery_is_refused_a_second_time(live: Live,
                                                                                     forge: Path) -> None:
    run_id, _ = live.launch(forge, "bot_code")
    (line,) = live.disposed(run_id)
    assert "deliberate_failure" in line
    doc = live.store.load_run(run_id)
    assert (doc.status, doc.failure_code) == (RunStatus.FAILED_RESUMABLE, "PHASE_BUDGET_EXCEEDED")
    # a re-publish arrives anyway: never synthesise a resume for a bot-defined code
    live.queue.publish(Delivery(kind=Kind.LAUNCH, run_id=run_id, request_id="republish", repo_url=str(forge),
                                ref="main", file="outcomes.bot"))
    lines = live.disposed(run_id, 2)
    assert lines[1].startswith("ack ") and "bot_defined" in lines[1]
    (skipped,) = live.events(run_id, "run_retry_skipped")
    assert skipped.payload["code"] == "PHASE_BUDGET_EXCEEDED" and skipped.payload["reason"] == "bot_defined"
    doc = live.store.load_run(run_id)
    assert (doc.status, doc.failure_code) == (RunStatus.FAILED_RESUMABLE, "PHASE_BUDGET_EXCEEDED")
    assert len(live.events(run_id, "run_delivery_claimed")) == 1  # the refusal executed nothing


def test_a_deterministic_engine_failure_is_acked_with_run_retry_skipped(live: Live, forge: Path) -> None:
    run_id, _ = live.launch(forge, "deterministic")
    (line,) = live.disposed(run_id)
    assert line.startswith("ack ") and "deterministic" in line
    doc = live.store.load_run(run_id)
    assert (doc.status, doc.failure_code) == (RunStatus.FAILED_RESUMABLE, "EXPRESSION_FAILED")
    (skipped,) = live.events(run_id, "run_retry_skipped")
    assert skipped.payload["reason"] == "deterministic" and skipped.payload["code"] == "EXPRESSION_FAILED"
    assert skipped.payload["error"] == doc.error
    assert len(live.events(run_id, "run_delivery_claimed")) == 1


def test_a_transient_failure_is_redelivered_with_its_delay_then_dead_lettered(live: Live, forge: Path) -> None:
    run_id, cdir = live.launch(forge, "transient")
    lines = live.disposed(run_id, 3)
    assert [ln.split()[0] for ln in lines] == ["nak", "nak", "dead-letter"]
    delay = row_for("TOOL_FAILED_TRANSIENT").redelivery_delay_s * 0.01  # the table's row, scaled
    scheduled = live.events(run_id, "run_retry_scheduled")
    assert [e.payload["delay_s"] for e in scheduled] == pytest.approx([delay, delay])
    assert [e.payload["code"] for e in scheduled] == ["TOOL_FAILED_TRANSIENT"] * 2
    claims = live.events(run_id, "run_delivery_claimed")
    assert [c.payload["attempt"] for c in claims] == [1, 2, 3]
    assert [c.payload["action"] for c in claims] == ["launch", "resume", "resume"]
    doc = live.store.load_run(run_id)
    assert (doc.status, doc.failure_code) == (RunStatus.FAILED_RESUMABLE, FailureCode.DLQ_PARKED.value)
    assert "TOOL_FAILED_TRANSIENT" in (doc.error or "")
    (parked,) = live.events(run_id, "run_dlq_parked")
    assert parked.payload["deliveries"] == 3
    status = live.queue.status()
    assert [d["run_id"] for d in status["dead_letters"]] == [run_id] and status["deliveries"] == []
    # every delivery re-executed the node (the first one with the table's in-run retries too; the
    # per-node attempt counters survive a resume, so later deliveries do not get them again)
    assert counts(cdir)["work"] == 3 + row_for("TOOL_FAILED_TRANSIENT").in_run_retries


def test_undecodable_and_unknown_deliveries_are_terminated(live: Live) -> None:
    async def raw() -> None:
        await live.queue.bridge.js.publish(live.queue.subject, b"\xff not json", stream=live.queue.stream)

    live.queue.bridge.call(raw())
    live.queue.publish(Delivery(kind=Kind.RESUME, run_id="01nosuchrun0000000000000000000000", request_id="x"))
    wait_for(lambda: sum(ln.startswith("term ") for ln in live.lines) == 2, f"two terms: {live.lines}")
    assert any("undecodable" in ln for ln in live.lines)
    assert any("unknown_run" in ln for ln in live.lines)
    assert live.queue.status()["deliveries"] == []


def test_the_redelivery_delays_are_rows_of_the_failure_code_table() -> None:
    assert row_for("SANDBOX_SETUP_TIMEOUT").redelivery_delay_s == 120
    assert row_for("SANDBOX_CAPACITY").redelivery_delay_s > 120
    for code in FailureCode:
        row = row_for(code.value)
        assert row is not None
        if row.retry.value == "transient":
            assert row.redelivery_delay_s > 0, code


def test_a_lost_lease_stops_the_execution_and_nothing_more_is_written(live: Live, forge: Path) -> None:
    from tests.queue.conftest import THREE  # noqa: F401 - the three-node workflow is in the forge

    count_dir = live.tmp_path / "lost"
    count_dir.mkdir()
    doc, _ = queue_launch(live.store, live.queue, request_id="lost", file="three.bot", repo_url=str(forge),
                          ref="main", vars={"count_dir": str(count_dir), "pause_s": "30"})
    run_id = doc.id
    wait_for(lambda: (count_dir / "b.count").exists(), "node b to start")
    seen = len(live.store.read_events(run_id))

    async def steal() -> None:  # another runner takes the lease (as if ours had expired)
        from iterion.store.jetstream.store import run_token

        await live.queue.leases.purge(run_token(run_id))
        await live.queue.leases.create(run_token(run_id), b'{"runner": "thief"}')

    live.queue.bridge.call(steal())
    wait_for(lambda: any("lost its lease" in ln for ln in live.lines), f"the runner to stop: {live.lines}")
    doc = live.store.load_run(run_id)
    assert doc.status is RunStatus.RUNNING  # the new owner's to decide: nothing was written over it
    assert len(live.store.read_events(run_id)) == seen
    assert not (count_dir / "c.count").exists()
    assert live.runner.store.is_locked(run_id) is False  # the execution let go of the run


def test_an_unreachable_forge_is_offered_again_then_dead_lettered(live: Live) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on: the connection is refused (transient)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    doc, _ = queue_launch(live.store, live.queue, request_id="nope", file="three.bot",
                          repo_url=f"http://127.0.0.1:{port}/forge.git", ref="main")
    lines = live.disposed(doc.id, 3)
    assert [ln.split()[0] for ln in lines] == ["nak", "nak", "dead-letter"] and "clone_failed" in lines[0]
    parked = live.store.load_run(doc.id)
    assert (parked.status, parked.failure_code) == (RunStatus.FAILED, "DLQ_PARKED")
    assert "git clone failed" in (parked.error or "")
    assert [d["run_id"] for d in live.queue.status()["dead_letters"]] == [doc.id]


@pytest.mark.parametrize("where", ["repo", "ref"])
def test_a_missing_repository_or_ref_fails_at_the_first_delivery(live: Live, forge: Path, tmp_path: Path,
                                                                 where: str) -> None:
    repo, ref = (str(tmp_path / "no-such-forge.git"), "main") if where == "repo" else (str(forge), "no-such-branch")
    doc, _ = queue_launch(live.store, live.queue, request_id=f"missing-{where}", file="three.bot",
                          repo_url=repo, ref=ref)
    (line,) = live.disposed(doc.id)
    assert line.startswith(f"term run {doc.id} (repo_not_found: ") and "delivery 1/3" in line
    failed = live.store.load_run(doc.id)
    assert (failed.status, failed.failure_code) == (RunStatus.FAILED, "REPO_NOT_FOUND")
    said = f"repository {repo} does not exist" if where == "repo" else f"ref {ref} does not exist in repository {repo}"
    assert (failed.error or "").startswith(said)
    (dropped,) = live.events(doc.id, "run_delivery_dropped")
    assert dropped.payload["failure_code"] == "REPO_NOT_FOUND" and dropped.payload["reason"] == "repo_not_found"
    assert not live.events(doc.id, "run_delivery_claimed")  # nothing executed
    wait_for(lambda: live.queue.status()["deliveries"] == [] or None, "the delivery to be gone")
    assert live.queue.status()["dead_letters"] == []  # terminated, not parked after 3 tries
    assert len([ln for ln in live.lines if doc.id in ln and ln.startswith("claim")]) == 1
