"""One answers file, either shape, the same result through every surface: `iterion run` and
`iterion resume`, HTTP launch and HTTP resume, `iterion remote runs resume` (iterion/requests.py
holds the rule once: node-keyed, or flat for the one human node / the paused node)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.server.conftest import Server, wait_status

ANSWER = {"approved": True, "note": "ship it"}
SHAPES = {"flat": ANSWER, "keyed": {"approve": ANSWER}}


def _outcome(server: Server, run_id: str) -> tuple[str, Any]:
    body = wait_status(server.client(), run_id, {"finished", "paused_waiting_human", "failed", "failed_resumable"})
    return body["run"]["status"], body["checkpoint"]["outputs"].get("approve")


def _parked(server: Server) -> str:
    c = server.client()
    run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
    wait_status(c, run_id, {"paused_waiting_human"})
    return str(run_id)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_same_answers_file_same_result_everywhere(server: Server, tmp_path: Path, shape: str) -> None:
    answers = tmp_path / f"{shape}.json"
    answers.write_text(json.dumps(SHAPES[shape]))
    project, c = server.project, server.client()
    results: dict[str, tuple[str, Any]] = {}

    ran = run_cli("run", "demo/demo.bot", "--answers-file", str(answers), "--json", cwd=project)
    assert ran.returncode == 0, ran.stderr
    results["cli launch"] = _outcome(server, json.loads(ran.stdout)["run_id"])

    run_id = _parked(server)
    resumed = run_cli("resume", "--run-id", run_id, "--answers-file", str(answers), "--json", cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    results["cli resume"] = _outcome(server, run_id)

    r = c.post("/api/runs", json={"file": "demo/demo.bot", "answers": SHAPES[shape]})
    assert r.status_code == 201, r.text
    results["http launch"] = _outcome(server, r.json()["run_id"])

    run_id = _parked(server)
    r = c.post(f"/api/runs/{run_id}/resume", json={"answers": SHAPES[shape]})
    assert r.status_code == 202, r.text
    results["http resume"] = _outcome(server, run_id)

    run_id = _parked(server)
    env = {"ITERION_SERVER": server.url, "ITERION_SERVER_TOKEN": server.token}
    remote = run_cli("remote", "runs", "resume", run_id, "--answers-file", str(answers), "--json",
                     cwd=project, env=env)
    assert remote.returncode == 0, remote.stderr
    results["remote resume"] = _outcome(server, run_id)

    assert all(v == ("finished", ANSWER) for v in results.values()), results


def test_answers_for_another_node_are_refused_alike(server: Server, tmp_path: Path) -> None:
    """Node-keyed answers that do not name the gate: one line naming both, 422 / exit 2, nothing run."""
    other = {"review": {"approved": True}}
    answers = tmp_path / "other.json"
    answers.write_text(json.dumps(other))
    run_id = _parked(server)
    r = server.client().post(f"/api/runs/{run_id}/resume", json={"answers": other})
    assert r.status_code == 422 and "but the run waits on approve" in r.json()["error"], r.text
    cli = run_cli("resume", "--run-id", run_id, "--answers-file", str(answers), cwd=server.project)
    assert cli.returncode == 2 and "but the run waits on approve" in cli.stderr, cli.stderr
    env = {"ITERION_SERVER": server.url, "ITERION_SERVER_TOKEN": server.token}
    remote = run_cli("remote", "runs", "resume", run_id, "--answers-file", str(answers), cwd=server.project, env=env)
    assert remote.returncode == 2 and "but the run waits on approve" in remote.stderr, remote.stderr
    assert server.run_json(run_id)["status"] == "paused_waiting_human"


def test_auto_merge_string_is_refused_not_read_as_true(server: Server) -> None:
    r = server.client().post("/api/runs", json={"file": "demo/demo.bot", "auto_merge": "false"})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "auto_merge must be true or false, got 'false'"
    assert server.client().get("/api/runs").json()["runs"] == []  # nothing was created
