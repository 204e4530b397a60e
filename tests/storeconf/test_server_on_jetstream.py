"""End to end on JetStream: `iterion server --nats URL` launches, pauses and resumes a run over
HTTP; `iterion inspect --nats URL` (another process, another store directory) shows it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.conftest import run_cli
from tests.natsserver import NatsServer
from tests.server.conftest import demo_project, start_server, wait_status


def _env(prefix: str) -> dict[str, str | None]:
    """For run_cli: no ambient store, this test's bucket prefix."""
    return {"ITERION_STORE_DIR": None, "ITERION_NATS_URL": None, "ITERION_NATS_PREFIX": prefix}


def test_server_and_inspect_share_runs_through_jetstream(nats_server: NatsServer, tmp_path: Path) -> None:
    prefix = "e2e" + uuid.uuid4().hex[:8]
    project = demo_project(tmp_path / "project")
    server = start_server(project, "--nats", nats_server.url, "--no-queue", env={"ITERION_NATS_PREFIX": prefix})
    try:
        c = server.client()
        r = c.post("/api/runs", json={"file": "demo/demo.bot"})
        assert r.status_code == 201, r.text
        run_id = r.json()["run_id"]
        paused = wait_status(c, run_id, {"paused_waiting_human"})
        assert paused["pending"]["node"] == "approve"
        version = paused["run"]["version"]
        # the run's documents are in JetStream; the server's store dir holds only the local half
        local = server.store / "runs" / run_id
        assert local.is_dir() and not (local / "run.json").exists() and not (local / "events.jsonl").exists()

        r = c.post(f"/api/runs/{run_id}/resume", json={"answers": {"approved": True, "note": "ship it"},
                                                       "expected_version": version})
        assert r.status_code == 202, r.text
        done = wait_status(c, run_id, {"finished"})
        assert done["run"]["status"] == "finished" and done["run"]["version"] > version
        # a second writer still holding the paused version: the stale update is a 409
        stale = c.post(f"/api/runs/{run_id}/resume", json={"expected_version": version})
        assert stale.status_code == 409, stale.text
        assert stale.json()["reason"] == "stale_version" and "reload the run and retry" in stale.json()["error"]
        listed = c.get("/api/runs").json()["runs"]
        assert [x["id"] for x in listed] == [run_id]
    finally:
        server.stop()

    # another process, another directory, another (empty) store root: the same run, from JetStream
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = run_cli("inspect", "--nats", nats_server.url, "--store-dir", str(tmp_path / "other-root"),
                "--run-id", run_id, "--events", "--all", "--json", cwd=elsewhere, env=_env(prefix))
    assert p.returncode == 0, p.stderr
    detail = json.loads(p.stdout)
    assert detail["id"] == run_id and detail["status"] == "finished"
    assert detail["outputs"]["approve"] == {"approved": True, "note": "ship it"}
    types = [e["type"] for e in detail["events"]]
    assert types[0] == "run_started" and "run_paused" in types and "run_resumed" in types
    assert types[-1] == "run_finished"
    assert [e["seq"] for e in detail["events"]] == list(range(1, len(types) + 1))

    # the run list through $ITERION_NATS_URL (no flag), and --nats off falls back to the files
    listed = run_cli("inspect", "--store-dir", str(tmp_path / "other-root"), "--json",
                     cwd=elsewhere, env={**_env(prefix), "ITERION_NATS_URL": nats_server.url})
    assert listed.returncode == 0, listed.stderr
    assert [(r["id"], r["status"]) for r in json.loads(listed.stdout)] == [(run_id, "finished")]
    off = run_cli("inspect", "--nats", "off", "--store-dir", str(tmp_path / "other-root"), "--json",
                  cwd=elsewhere, env={**_env(prefix), "ITERION_NATS_URL": nats_server.url})
    assert off.returncode == 0 and json.loads(off.stdout) == [], off.stderr


def test_a_bad_or_unreachable_nats_url_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from tests.natsserver import free_port

    for url, says in (("http://127.0.0.1:4222", "not a NATS URL"), ("nats://127.0.0.1:99999", "not a NATS URL"),
                      (f"nats://127.0.0.1:{free_port()}", "cannot reach the run store")):
        p = run_cli("inspect", "--nats", url, "--store-dir", str(tmp_path / "s"), cwd=tmp_path, env=_env("x"))
        assert p.returncode == 2, (url, p.stdout, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and says in lines[0], (url, p.stderr)
