"""The HTTP API's schema: generated from the request models, valid, checked in, served, and every
example it documents is a body the real server takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openapi_spec_validator import validate

from iterion.requests import RewindRunRequest
from iterion.rewind.files import RestoreScope
from iterion.server.openapi import openapi_document
from tests.server.conftest import Server, wait_status

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def _examples(doc: dict[str, Any], path: str) -> list[dict[str, Any]]:
    content = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return [e["value"] for e in content["examples"].values()]


def test_the_document_validates_and_docs_copy_is_current() -> None:
    doc = openapi_document()
    validate(doc)  # raises on an invalid OpenAPI 3.1 document
    assert json.loads(DOC.read_text()) == doc, \
        "docs/openapi.json is stale: python -m iterion.server.openapi docs/openapi.json"
    launch = doc["components"]["schemas"]["LaunchRequest"]
    assert launch["additionalProperties"] is False and launch["required"] == ["file"]
    assert {"repo_url", "attachments", "auto_merge", "answers", "budget"} <= set(launch["properties"])
    # the rewind scope's values are the engine's, written once more only as the schema's enum
    scope = RewindRunRequest.model_json_schema()["properties"]["restore_scope"]["anyOf"][0]["enum"]
    assert set(scope) == {s.value for s in RestoreScope}


def test_served_document_is_the_generated_one(server: Server) -> None:
    r = server.client(token="").get("/openapi.json")  # public, like /healthz: no run data in it
    assert r.status_code == 200 and r.json() == openapi_document()


def test_every_documented_example_is_accepted(server: Server) -> None:
    c = server.client()
    doc = openapi_document()
    parked: list[str] = []
    for body in _examples(doc, "/api/runs"):
        r = c.post("/api/runs", json=body)
        assert r.status_code == 201, (body, r.text)
        end = wait_status(c, r.json()["run_id"], {"paused_waiting_human", "finished"})
        if body.get("answers"):  # answers known up front: the gate never parks, in either shape
            assert end["run"]["status"] == "finished", body
            assert end["checkpoint"]["outputs"]["approve"] == {"approved": True, "note": "ship it"}
        else:
            parked.append(end["run"]["id"])
    resumes = _examples(doc, "/api/runs/{run}/resume")
    while len(parked) < len(resumes):
        r = c.post("/api/runs", json={"file": "demo/demo.bot"})
        parked.append(wait_status(c, r.json()["run_id"], {"paused_waiting_human"})["run"]["id"])
    for run_id, body in zip(parked, resumes, strict=False):
        r = c.post(f"/api/runs/{run_id}/resume", json=body)
        assert r.status_code == 202, (body, r.text)
        end = wait_status(c, run_id, {"finished"})
        assert end["checkpoint"]["outputs"]["approve"] == {"approved": True, "note": "ship it"}
    live = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
    wait_status(c, live, {"paused_waiting_human"})
    for body in _examples(doc, "/api/runs/{run}/rewind"):  # dry runs: previews
        r = c.post(f"/api/runs/{live}/rewind", json=body)
        assert r.status_code == 200 and r.json()["dry_run"], (body, r.text)
    for body in _examples(doc, "/api/runs/{run}/rewind/undo"):  # each takes back a real rewind
        r = c.post(f"/api/runs/{live}/rewind", json={"node": "stamp"})
        assert r.status_code == 200, r.text
        r = c.post(f"/api/runs/{live}/rewind/undo", json=body)
        assert r.status_code == 200, (body, r.text)
    for path in ("/api/runs/{run}/pause", "/api/runs/{run}/cancel"):
        for body in _examples(doc, path):
            r = c.post(path.replace("{run}", live), json=body)
            assert r.status_code in (200, 409), (path, body, r.text)  # 409: a cancelled run is not paused
    assert c.get(f"/api/runs/{live}").json()["run"]["status"] == "cancelled"
