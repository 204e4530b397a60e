"""Two `iterion runner` processes claiming from one JetStream queue, sharing the JetStream store."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from iterion.queue.publish import queue_launch
from iterion.store import RunStatus
from tests.conftest import git
from tests.queue.conftest import Cluster, counts, wait_for

DONE = {RunStatus.FINISHED, RunStatus.FAILED, RunStatus.FAILED_RESUMABLE, RunStatus.CANCELLED,
        RunStatus.PAUSED_OPERATOR, RunStatus.PAUSED_WAITING_HUMAN}


def _events(store: Any, run_id: str, kind: str) -> list[Any]:
    return [e for e in store.read_events(run_id) if e.type == kind]


def _launch(cluster: Cluster, store: Any, queue: Any, forge: Path, count_dir: Path, *, i: int = 0,
            pause_s: str = "0") -> str:
    count_dir.mkdir(parents=True, exist_ok=True)
    doc, _ = queue_launch(store, queue, request_id=f"req-{i}", file="three.bot", repo_url=str(forge), ref="main",
                          vars={"count_dir": str(count_dir), "pause_s": pause_s})
    return doc.id


def test_ten_runs_over_two_runners_each_node_executes_exactly_once(cluster: Cluster, forge: Path,
                                                                   tmp_path: Path) -> None:
    from tests.conftest import make_checkout
    from tests.server.conftest import start_server

    server = start_server(make_checkout(tmp_path / "project"), "--nats", cluster.nats.url,
                          env={"ITERION_NATS_PREFIX": cluster.prefix})
    a, b = cluster.runner("ra"), cluster.runner("rb")
    try:
        a.wait_ready()
        b.wait_ready()
        store, c = cluster.store(), server.client()
        ids = []
        for i in range(10):
            (tmp_path / "counts" / str(i)).mkdir(parents=True)
            r = c.post("/api/runs", json={"repo_url": str(forge), "ref": "main", "file": "three.bot",
                                          "vars": {"count_dir": str(tmp_path / "counts" / str(i)), "pause_s": "0.2"}})
            assert r.status_code == 201 and r.json()["status"] == "queued", r.text
            ids.append(r.json()["run_id"])
        wait_for(lambda: all(store.load_run(r).status in DONE for r in ids), "ten runs to end", timeout=180)
        by_runner: dict[str, int] = {}
        for i, run_id in enumerate(ids):
            doc = store.load_run(run_id)
            assert doc.status is RunStatus.FINISHED, (doc.status, doc.error)
            assert counts(tmp_path / "counts" / str(i)) == {"a": 1, "b": 1, "c": 1}  # exactly once each
            claims = _events(store, run_id, "run_delivery_claimed")
            assert len(claims) == 1
            by_runner[claims[0].payload["runner"]] = by_runner.get(claims[0].payload["runner"], 0) + 1
        assert set(by_runner) == {"ra", "rb"}, by_runner  # spread over both
        logs = a.text() + b.text()
        assert logs.count("claim run ") == 10 and logs.count("ack run ") == 10
        status = c.get("/api/queue").json()
        assert status["pending"] == 0 and status["deliveries"] == [] and status["dead_letters"] == []
        assert a.stop() == 0 and b.stop() == 0  # SIGTERM: a clean exit
        assert "stopped after" in a.text()
    finally:
        server.stop()


def test_sigkill_mid_node_the_other_runner_takes_over_and_restores_the_bank(cluster: Cluster, forge: Path,
                                                                           tmp_path: Path) -> None:
    store, queue = cluster.store(), cluster.queue()
    # the same workflow uninterrupted, for the reference tree and outputs
    solo = cluster.runner("solo")
    ref_id = _launch(cluster, store, queue, forge, tmp_path / "ref", i=99)
    wait_for(lambda: store.load_run(ref_id).status in DONE, "the reference run")
    assert store.load_run(ref_id).status is RunStatus.FINISHED
    solo.stop()

    victim = cluster.runner("victim")
    run_id = _launch(cluster, store, queue, forge, tmp_path / "killed", i=1, pause_s="60")
    # a's checkpoint is pushed, b is executing (sleeping on its first execution)
    wait_for(lambda: (tmp_path / "killed" / "b.count").exists()
             and _events(store, run_id, "run_workspace_checkpoint"), "node b to start", timeout=90)
    assert victim.stop(signal.SIGKILL) == -signal.SIGKILL
    assert store.load_run(run_id).status is RunStatus.RUNNING
    heir = cluster.runner("heir")
    wait_for(lambda: store.load_run(run_id).status is RunStatus.FINISHED or f"ack run {run_id}" in heir.text(),
             "the other runner to finish the run", timeout=120)
    doc = store.load_run(run_id)
    assert doc.status is RunStatus.FINISHED, (doc.status, doc.error)
    assert counts(tmp_path / "killed") == {"a": 1, "b": 2, "c": 1}  # lost at most the node it was running
    claims = _events(store, run_id, "run_delivery_claimed")
    assert [c.payload["runner"] for c in claims] == ["victim", "heir"]
    assert claims[1].payload["action"] == "takeover" and claims[1].payload["attempt"] >= 2
    assert _events(store, run_id, "run_workspace_reset")
    (restored,) = _events(store, run_id, "run_workspace_bank_restored")
    assert restored.payload["restored"] is True, restored.payload
    assert restored.payload["base"] == claims[0].payload["base"]
    assert restored.payload["head"] and restored.payload["ref"].startswith(f"refs/iterion/runs/{run_id}/checkpoints/")
    # the same final tree and outputs as the uninterrupted run
    last = _events(store, run_id, "run_workspace_checkpoint")[-1].payload["commit"]
    ref_last = _events(store, ref_id, "run_workspace_checkpoint")[-1].payload["commit"]
    assert git(forge, "ls-tree", "-r", last) == git(forge, "ls-tree", "-r", ref_last)
    outputs = store.load_checkpoint(run_id).outputs
    assert outputs == store.load_checkpoint(ref_id).outputs
    assert "ack run " + run_id in heir.text()


def test_sigterm_hands_the_run_back_and_another_runner_resumes_it(cluster: Cluster, forge: Path,
                                                                  tmp_path: Path) -> None:
    store, queue = cluster.store(), cluster.queue()
    first = cluster.runner("first", "--grace", "0.5")
    run_id = _launch(cluster, store, queue, forge, tmp_path / "c", pause_s="60")
    wait_for(lambda: (tmp_path / "c" / "b.count").exists(), "node b to start")
    assert first.stop(signal.SIGTERM) == 0  # graceful: grace, cancel, hand back
    log = first.text()
    assert "SIGTERM: stopping" in log and "nak +" in log and "(shutdown" in log
    doc = store.load_run(run_id)
    assert doc.status is RunStatus.CANCELLED and doc.options.get("queue_interrupted") is True
    # its workspace was pushed at the cancel (the bank a later claim restores)
    assert _events(store, run_id, "run_workspace_checkpoint")
    second = cluster.runner("second")
    # the engine writes FINISHED; the runner then clears the hand-back mark and only then acks
    # (the mark must outlive any crash before the run is final), so wait for the ack, not the status
    wait_for(lambda: f"ack run {run_id} (finished" in second.text(), "the other runner to finish it")
    assert store.load_run(run_id).status is RunStatus.FINISHED
    assert counts(tmp_path / "c") == {"a": 1, "b": 2, "c": 1}
    assert "queue_interrupted" not in store.load_run(run_id).options
    (restored,) = _events(store, run_id, "run_workspace_bank_restored")
    assert restored.payload["restored"] is True
    assert f"ack run {run_id} (finished" in second.text()


def test_a_nats_server_restart_mid_run_loses_nothing(tmp_path: Path, forge: Path) -> None:
    from tests.natsserver import NatsServer

    nats = NatsServer(tmp_path / "nats").start()
    cluster = Cluster(nats, tmp_path)
    try:
        store, queue = cluster.store(), cluster.queue(ack_wait=10, lease_ttl=10)
        runner = cluster.runner("r", ack_wait=10, lease_ttl=10)
        run_id = _launch(cluster, store, queue, forge, tmp_path / "c", pause_s="3")
        wait_for(lambda: (tmp_path / "c" / "b.count").exists(), "node b to start")
        nats.restart()  # same port, same storage dir: file-stored streams and buckets survive
        wait_for(lambda: store.load_run(run_id).status in DONE, "the run to end after the restart", timeout=120)
        doc = store.load_run(run_id)
        assert doc.status is RunStatus.FINISHED, (doc.status, doc.error, runner.text()[-2000:])
        assert counts(tmp_path / "c") == {"a": 1, "b": 1, "c": 1}
        events = store.read_events(run_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.node for e in events if e.type == "node_finished"] == ["a", "b", "c"]
        wait_for(lambda: f"ack run {run_id} (finished" in runner.text(), "the delivery's ack")
        assert queue.status()["deliveries"] == []
    finally:
        cluster.close()
        nats.stop()


def test_a_runner_dying_on_the_last_delivery_gets_the_run_dead_lettered(cluster: Cluster, forge: Path,
                                                                        tmp_path: Path) -> None:
    store, queue = cluster.store(), cluster.queue(max_deliver=1)  # created first: one delivery only
    victim = cluster.runner("victim")
    run_id = _launch(cluster, store, queue, forge, tmp_path / "c", pause_s="60")
    wait_for(lambda: (tmp_path / "c" / "b.count").exists(), "node b to start")
    other = cluster.runner("other")  # listening when the server announces the exhausted delivery
    other.wait_ready()
    victim.stop(signal.SIGKILL)
    wait_for(lambda: store.load_run(run_id).failure_code == "DLQ_PARKED", "the run to be parked", timeout=60)
    doc = store.load_run(run_id)
    assert doc.status is RunStatus.FAILED_RESUMABLE and "ORPHANED_RUN" in (doc.error or "")
    assert _events(store, run_id, "run_dlq_parked")
    status = queue.status()
    assert status["deliveries"] == [] and [d["run_id"] for d in status["dead_letters"]] == [run_id]
    assert f"dead-letter run {run_id}" in other.text()
    assert counts(tmp_path / "c") == {"a": 1, "b": 1}  # nothing executed it again


def _kept_advisories(queue: Any) -> int:
    """How many max-deliveries advisories the queue's own stream keeps for the next runner."""
    return int(queue.bridge.call(queue.bridge.js.stream_info(queue.exhausted_stream)).state.messages or 0)


def test_an_exhausted_delivery_with_no_runner_listening_is_dead_lettered_by_the_next_runner(
        cluster: Cluster, forge: Path, tmp_path: Path) -> None:
    store, queue = cluster.store(), cluster.queue(max_deliver=1)  # created first: one delivery only
    victim = cluster.runner("victim")
    run_id = _launch(cluster, store, queue, forge, tmp_path / "c", pause_s="60")
    wait_for(lambda: (tmp_path / "c" / "b.count").exists(), "node b to start")
    victim.stop(signal.SIGKILL)
    # the last delivery's ack wait runs out while no runner is up: the server's advisory is kept
    # (waited for in the stream that keeps it, not by sleeping past the ack wait)
    wait_for(lambda: _kept_advisories(queue), "the max-deliveries advisory to be kept", timeout=60)
    assert store.load_run(run_id).failure_code != "DLQ_PARKED"
    late = cluster.runner("late")
    wait_for(lambda: store.load_run(run_id).failure_code == "DLQ_PARKED", "the late runner to park it",
             timeout=60)
    assert _events(store, run_id, "run_dlq_parked")
    assert [d["run_id"] for d in queue.status()["dead_letters"]] == [run_id]
    assert f"dead-letter run {run_id}" in late.text()
    assert counts(tmp_path / "c") == {"a": 1, "b": 1}  # nothing executed it again
