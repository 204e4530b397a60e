"""The HTTP API's OpenAPI document, generated from the request models (``iterion.requests``).

Served at ``GET /openapi.json`` and checked into docs/openapi.json (tests/server/test_openapi.py
fails when the two differ: regenerate with ``python -m iterion.server.openapi docs/openapi.json``).
Request bodies are the models' JSON schemas, with their examples; answers are described by their
fields (the service's answers are JSON built by hand, listed in the README's endpoints table).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gitrefs.persist import atomic_write_bytes
from iterion.requests import ControlRequest, LaunchRequest, ResumeRequest, RewindRunRequest, UndoRewindRequest

REF = "#/components/schemas/{model}"
MODELS: tuple[type[BaseModel], ...] = (LaunchRequest, ResumeRequest, ControlRequest, RewindRunRequest,
                                       UndoRewindRequest)
# (path, summary, request model, success status): the operations taking a body
POSTS: tuple[tuple[str, str, type[BaseModel], str], ...] = (
    ("/api/runs", "Launch a run (queued with a queue: repo_url, ref, request_id)", LaunchRequest, "201"),
    ("/api/runs/{run}/resume", "Resume a paused, failed_resumable or cancelled run", ResumeRequest, "202"),
    ("/api/runs/{run}/cancel", "Cancel a run", ControlRequest, "200"),
    ("/api/runs/{run}/pause", "Pause a run at its next node boundary", ControlRequest, "200"),
    ("/api/runs/{run}/rewind", "Rewind a run to a node (files and checkpoint)", RewindRunRequest, "200"),
    ("/api/runs/{run}/rewind/undo", "Take the last rewind back", UndoRewindRequest, "200"),
)
GETS: tuple[tuple[str, str], ...] = (
    ("/api/runs", "List runs, newest first (status, workflow, since, after, limit)"),
    ("/api/runs/{run}", "A run: document, checkpoint, pending question, executions (each with files and "
                        "diff_segments: its stretches, pauses cut out), pause_edits (what changed while the run was "
                        "parked, between pause:/fail: and resume: - the person's edits, in no execution's files), "
                        "subbot_children (the subbot tree below it; its parent is run.parent_run/parent_node)"),
    ("/api/runs/{run}/events", "A page of the run's events (after, limit; follow=1 streams them)"),
    ("/api/runs/{run}/commits", "The run's workspace commits (worktree runs)"),
    ("/api/runs/{run}/files", "Files changed between two boundaries (from, to)"),
    ("/api/runs/{run}/artifacts", "The run's artifacts"),
    ("/api/runs/{run}/attachments", "The run's attachments"),
    ("/api/queue", "The work queue's status (a server with a queue)"),
)
ERROR = {"type": "object", "required": ["error", "exit_code"], "properties": {
    "error": {"type": "string", "description": "one line naming the problem"},
    "hint": {"type": ["string", "null"], "description": "one line naming the fix"},
    "exit_code": {"type": "integer", "description": "the CLI's exit code for the same refusal"}}}


def _errors() -> dict[str, Any]:
    ref = {"content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}}}
    return {"401": {"description": "missing or wrong token", **ref},
            "404": {"description": "no such run", **ref},
            "409": {"description": "refused by the run's state (or a stale expected_version)", **ref},
            "422": {"description": "the request is invalid", **ref}}


def _run_param(path: str) -> list[dict[str, Any]]:
    if "{run}" not in path:
        return []
    return [{"name": "run", "in": "path", "required": True, "description": "run id, unique prefix or name",
             "schema": {"type": "string"}}]


def openapi_document() -> dict[str, Any]:
    schemas: dict[str, Any] = {"Error": ERROR}
    for model in MODELS:
        schema = model.model_json_schema(ref_template=REF, mode="validation")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    paths: dict[str, Any] = {}
    for path, summary in GETS:
        paths.setdefault(path, {})["get"] = {
            "summary": summary, "parameters": _run_param(path),
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
                          **_errors()}}
    for path, summary, model, status in POSTS:
        examples: list[Any] = model.model_json_schema().get("examples") or []
        content: dict[str, Any] = {"schema": {"$ref": REF.format(model=model.__name__)}}
        if examples:
            content["examples"] = {f"example{i + 1}": {"value": e} for i, e in enumerate(examples)}
        paths.setdefault(path, {})["post"] = {
            "summary": summary, "parameters": _run_param(path),
            "requestBody": {"required": True, "content": {"application/json": content}},
            "responses": {status: {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
                          **_errors()}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "iterion server", "version": "1",
                 "description": "The HTTP API of `iterion server` (docs/http-api.md). Every call needs "
                                "`Authorization: Bearer TOKEN`; unknown fields are refused (422)."},
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }


def write(path: Path) -> None:
    """Write the document to ``path`` (docs/openapi.json), as the test compares it."""
    atomic_write_bytes(path, (json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n").encode("utf-8"))


def main() -> None:
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/openapi.json"))


if __name__ == "__main__":
    main()
