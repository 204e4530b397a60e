"""`iterion server --nats URL` publishes deliveries; `iterion runner` executes them."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx

from iterion.queue.delivery import Delivery, Kind
from tests.conftest import make_checkout, run_cli
from tests.queue.conftest import Cluster, make_forge, runner_env, wait_for
from tests.server.conftest import TOKEN, Server, start_server

GATE = """\
## prepare, a human gate, then ship: the ship node writes the answer into the workspace.
schema approval:
  approved: bool
  note: string

tool prepare:
  command: "echo prepared > prepared.txt"

human approve:
  output: approval
  instructions: "Ship it?"

tool ship:
  command: "echo '{{outputs.approve.note}}' > shipped.txt"

workflow gate:
  entry: prepare
  prepare -> approve
  approve -> ship when approved
  approve -> done when not approved
  ship -> done
"""


def _server(cluster: Cluster, name: str) -> Server:
    project = make_checkout(cluster.root / f"project-{name}")
    return start_server(project, "--nats", cluster.nats.url, env={"ITERION_NATS_PREFIX": cluster.prefix})


def _events(c: httpx.Client, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in c.get(f"/api/runs/{run_id}/events", params={"limit": 1000}).json()["events"]
            if e["type"] == kind]


def _status(c: httpx.Client, run_id: str) -> str:
    return str(c.get(f"/api/runs/{run_id}").json()["run"]["status"])


def _remote(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = runner_env(ITERION_SERVER=server.url, ITERION_SERVER_TOKEN=TOKEN)
    return run_cli("remote", *args, env=env)


def test_launch_by_repo_queue_listing_and_two_resumes_through_two_servers(cluster: Cluster, tmp_path: Path) -> None:
    forge = make_forge(tmp_path / "forge", {"flows/gate.bot": GATE})
    s1, s2 = _server(cluster, "one"), _server(cluster, "two")
    try:
        c1, c2 = s1.client(), s2.client()
        launched = _remote(s1, "runs", "launch", "--repo", str(forge), "--ref", "main", "--file", "flows/gate.bot")
        assert launched.returncode == 0, launched.stderr
        run_id = launched.stdout.strip()
        # no runner yet: the run exists, queued, and the queue shows its delivery pending
        assert _status(c1, run_id) == "queued" and _status(c2, run_id) == "queued"
        q = c1.get("/api/queue").json()
        assert q["pending"] == 1 and [(d["run_id"], d["state"]) for d in q["deliveries"]] == [(run_id, "pending")]
        shown = _remote(s2, "queue", "--json")
        assert shown.returncode == 0 and json.loads(shown.stdout)["deliveries"][0]["run_id"] == run_id
        bad = c1.post("/api/runs", json={"repo_url": str(forge), "file": "/etc/passwd"})
        assert bad.status_code == 422 and "relative path inside the repository" in bad.json()["error"]
        # the fields only a direct execution takes: refused by the request model, naming why
        for field, value in (("auto_merge", False), ("attachments", {"a": "a.txt"}), ("branch_name", "b")):
            bad = c1.post("/api/runs", json={"repo_url": str(forge), "file": "flows/gate.bot", field: value})
            assert bad.status_code == 422 and bad.json()["error"] == \
                f"{field} is not supported by a server with a queue (a runner executes the run)", bad.text

        runner = cluster.runner("r1")
        wait_for(lambda: _status(c1, run_id) == "paused_waiting_human", "the run to reach its gate")
        wait_for(lambda: c1.get("/api/queue").json()["deliveries"] == [], "the launch delivery to be acked")
        version = c1.get(f"/api/runs/{run_id}").json()["run"]["version"]

        # two resume requests for one run, at once, through two servers: exactly one executes
        answers: list[httpx.Response] = []
        # the same answers in both shapes (flat, node-keyed): whichever request wins, the same result
        bodies = {c1: {"answers": {"approved": True, "note": "ship it"}},
                  c2: {"answers": {"approve": {"approved": True, "note": "ship it"}}}}
        threads = [threading.Thread(target=lambda c=c: answers.append(c.post(f"/api/runs/{run_id}/resume",
                                                                                 json=bodies[c])))
                   for c in (c1, c2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.status_code for r in answers) == [202, 202], [r.text for r in answers]
        assert all(r.json()["queued"] for r in answers)
        wait_for(lambda: _status(c1, run_id) == "finished", "the run to finish")
        assert c1.get(f"/api/runs/{run_id}").json()["checkpoint"]["outputs"]["approve"] == \
            {"approved": True, "note": "ship it"}
        wait_for(lambda: _events(c1, run_id, "run_delivery_dropped"), "the second request to be dropped")
        assert len(_events(c1, run_id, "run_resumed")) == 1
        (dropped,) = _events(c2, run_id, "run_delivery_dropped")
        assert dropped["payload"]["reason"] in ("stale_request", "finished"), dropped
        assert c1.get(f"/api/runs/{run_id}").json()["run"]["version"] > version
        assert runner.text().count(f"claim run {run_id}") == 3
        # a resume of a finished run is refused at once, as without a queue
        refused = c2.post(f"/api/runs/{run_id}/resume", json={})
        assert refused.status_code == 409, refused.text
    finally:
        s1.stop()
        s2.stop()


def test_rewind_of_a_queued_run_drops_the_old_delivery_and_a_resume_continues_it(cluster: Cluster,
                                                                                 tmp_path: Path) -> None:
    forge = make_forge(tmp_path / "forge", {"gate.bot": GATE})
    s = _server(cluster, "one")
    try:
        c = s.client()
        cluster.runner("r1")
        r = c.post("/api/runs", json={"repo_url": str(forge), "file": "gate.bot", "request_id": "first"})
        assert r.status_code == 201, r.text
        run_id = r.json()["run_id"]
        again = c.post("/api/runs", json={"repo_url": str(forge), "file": "gate.bot", "request_id": "first"})
        assert again.status_code == 201 and again.json()["run_id"] == run_id and again.json()["duplicate"] is True
        wait_for(lambda: _status(c, run_id) == "paused_waiting_human", "the gate")
        rw = c.post(f"/api/runs/{run_id}/rewind", json={"node": "prepare", "restore_scope": "none"})
        assert rw.status_code == 200, rw.text
        doc = c.get(f"/api/runs/{run_id}").json()["run"]
        assert doc["status"] == "paused_operator" and doc["explicit_resume_required"] is True
        # the old launch delivery comes back (a redelivery, a re-publish): dropped, with an event
        queue = cluster.queue()
        queue.publish(Delivery(kind=Kind.LAUNCH, run_id=run_id, request_id="old", repo_url=str(forge), ref=None,
                               file="gate.bot"))
        wait_for(lambda: _events(c, run_id, "run_delivery_dropped"), "the old delivery to be dropped")
        (dropped,) = _events(c, run_id, "run_delivery_dropped")
        assert dropped["payload"]["reason"] == "explicit_resume_required"
        assert _status(c, run_id) == "paused_operator" and not _events(c, run_id, "run_resumed")
        # only a real resume request continues it
        res = _remote(s, "runs", "resume", run_id)  # waits for a runner's claim, then follows the run
        assert res.returncode == 4, res.stdout + res.stderr  # parked at the gate again
        assert "paused_waiting_human" in res.stdout
        assert _status(c, run_id) == "paused_waiting_human"
        resumed = _events(c, run_id, "run_resumed")[0]["payload"]
        assert resumed["restart_node"] == "prepare"
        assert c.get(f"/api/runs/{run_id}").json()["run"]["explicit_resume_required"] is False
    finally:
        s.stop()


THREE_SLOW = """\
tool a:
  command: "echo A > a.txt"

tool b:
  command: "sleep 60"

workflow slow:
  entry: a
  a -> b
  b -> done
"""


def test_cancel_reaches_the_owning_runner_and_a_queued_run_is_cancelled_in_place(cluster: Cluster,
                                                                                 tmp_path: Path) -> None:
    forge = make_forge(tmp_path / "forge", {"slow.bot": THREE_SLOW})
    s = _server(cluster, "one")
    try:
        c = s.client()
        waiting = c.post("/api/runs", json={"repo_url": str(forge), "file": "slow.bot"}).json()["run_id"]
        gone = c.post(f"/api/runs/{waiting}/cancel", json={"wait": 5})
        assert gone.status_code == 200, gone.text
        assert _status(c, waiting) == "cancelled"
        runner = cluster.runner("r1")
        wait_for(lambda: _events(c, waiting, "run_delivery_dropped"), "the cancelled run's delivery to be dropped")
        assert not _events(c, waiting, "run_started")

        run_id = c.post("/api/runs", json={"repo_url": str(forge), "file": "slow.bot"}).json()["run_id"]
        wait_for(lambda: [e for e in _events(c, run_id, "node_started") if e["node"] == "b"], "node b to start")
        r = c.post(f"/api/runs/{run_id}/cancel", json={"wait": 30, "reason": "enough"})
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "cancelled" and r.json()["runner"] == "r1" and r.json()["delivered"] == "requested"
        wait_for(lambda: f"ack run {run_id} (cancelled" in runner.text(), "the runner's ack")
        (cancelled,) = _events(c, run_id, "run_cancelled")
        assert "enough" in str(cancelled["payload"])
    finally:
        s.stop()
