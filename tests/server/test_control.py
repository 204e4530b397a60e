"""Runs outlive the server (one detached process per execution); pause and cancel over HTTP."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.conftest import write_bot
from tests.server.conftest import demo_project, start_server, wait_status

SLOW = """
tool first:
  command: "i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo one > first.txt"

tool second:
  command: "echo two > second.txt && env > env.txt"

tool third:
  command: "echo three > third.txt"

workflow slow:
  entry: first
  first -> second
  second -> third
  third -> done
"""


def test_run_survives_a_server_kill_then_pause_resume_and_cancel(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "project")
    write_bot(project / "wf", SLOW, name="slow")
    first = start_server(project)
    c = first.client()
    launched = c.post("/api/runs", json={"file": "wf/slow.bot"})
    assert launched.status_code == 201, launched.text
    run_id = launched.json()["run_id"]
    first.proc.send_signal(signal.SIGKILL)  # the server dies while `first` waits
    first.proc.wait()

    second = start_server(project)  # start-up reconciliation leaves the live run alone
    try:
        c = second.client()
        assert c.get(f"/api/runs/{run_id}").json()["run"]["status"] == "running"
        r = c.post(f"/api/runs/{run_id}/pause", json={"wait": 0})  # `first` waits for the test's go file
        assert r.status_code == 200, r.text
        assert r.json()["delivered"] == "pending" and r.json()["status"] == "running"
        (project / "go").write_text("")
        body = wait_status(c, run_id, {"paused_operator"})
        assert body["checkpoint"]["restart_node"] == "second"
        assert (project / "first.txt").read_text() == "one\n"  # the run went on without its server

        stale = c.post(f"/api/runs/{run_id}/cancel", json={"expected_version": body["run"]["version"] - 1})
        assert stale.status_code == 409 and "reload the run and retry" in stale.json()["error"]
        r = c.post(f"/api/runs/{run_id}/cancel", json={"expected_version": body["run"]["version"]})
        assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
        r = c.post(f"/api/runs/{run_id}/pause", json={})
        assert r.status_code == 409 and "cancelled" in r.json()["error"]

        assert c.post(f"/api/runs/{run_id}/resume", json={}).status_code == 202
        wait_status(c, run_id, {"finished"})
        assert (project / "third.txt").read_text() == "three\n"
        assert "ITERION_SERVER_TOKEN" not in (project / "env.txt").read_text()  # never reaches a tool
        assert len(list((second.store / "server" / "logs").glob(f"{run_id}-*.log"))) == 2
    finally:
        second.stop()


def test_server_start_reconciles_an_orphaned_run(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "project")
    write_bot(project / "wf", SLOW, name="slow")
    first = start_server(project)
    try:
        c = first.client()
        run_id = c.post("/api/runs", json={"file": "wf/slow.bot"}).json()["run_id"]
        deadline = time.monotonic() + 60  # kill it inside `first`, once its entry checkpoint exists
        while not any(e["type"] == "node_started" for e in c.get(f"/api/runs/{run_id}/events").json()["events"]):
            assert time.monotonic() < deadline, "the run never started its first node"
            time.sleep(0.1)
        owner = first.run_json(run_id)["owner"]["pid"]
        os.killpg(owner, signal.SIGKILL)  # the worker (its own session) dies mid-node: an orphan
        (project / "go").write_text("")  # lets the orphaned tool's loop end
    finally:
        first.stop()
    second = start_server(project)
    try:
        assert f"iterion: run {run_id} was orphaned (its process is gone): promoted to failed_resumable" \
            in second.stderr_path.read_text()
        body = second.client().get(f"/api/runs/{run_id}").json()
        assert body["run"]["status"] == "failed_resumable" and body["checkpoint"]["restart_node"] == "first"
    finally:
        second.stop()
