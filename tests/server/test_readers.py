"""Artifacts and attachments read back through the CLI and a real `iterion server`: listed, read
byte-identical both ways, tombstoned by a rewind, and never a way out of the store."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from iterion.store import Store
from tests.conftest import make_checkout, run_cli, start_cli, write_bot
from tests.server.conftest import Server, start_server

BOT = """
schema verdict:
  approved: bool
  summary: string

schema answer:
  approved: bool
  doc: file

schema ok:
  approved: bool

agent draft:
  backend: "script"
  output: verdict
  user: "draft"
  publish: draft_report

human gate:
  output: answer
  instructions: "Upload the spec."
  publish: upload_answer

agent review:
  backend: "script"
  output: verdict
  user: "review"
  publish: review_report

human gate2:
  output: ok
  instructions: "Ship it?"

workflow w:
  entry: draft
  draft -> gate
  gate -> review
  review -> gate2
  gate2 -> done
"""
SCRIPT = {"draft": {"*": {"output": {"approved": True, "summary": "draft é"}}},
          "review": {"*": {"output": {"approved": True, "summary": "looks fine"}}}}
BLOB = bytes(range(256)) * 3 + b"\0tail\xff"  # not text: NUL bytes, invalid UTF-8


def _cli(project: Path, *args: str, text: bool = True) -> subprocess.CompletedProcess[Any]:
    return run_cli(*args, cwd=project, env={"ITERION_STORE_DIR": None}, text=text)


@pytest.fixture
def parked(tmp_path: Path) -> tuple[Path, str]:
    """A run that published draft, gate and review artifacts and staged `doc`, parked at gate2."""
    project = make_checkout(tmp_path / "project")
    bot = write_bot(project / "flows", BOT, SCRIPT)
    (project / "blob.bin").write_bytes(BLOB)
    r = _cli(project, "run", str(bot), "--json")
    assert r.returncode == 4, r.stderr
    rid = json.loads(r.stdout)["run_id"]
    r = _cli(project, "resume", "--run-id", rid, "--answer", "approved=true", "--answer", "doc=@./blob.bin", "--json")
    assert r.returncode == 4, r.stderr
    return project, rid


@pytest.fixture
def served(parked: tuple[Path, str]) -> Any:
    project, rid = parked
    server = start_server(project)
    yield server, rid
    server.stop()


def _value_bytes(store: Path, name: str, version: int) -> bytes:
    doc = json.loads((store / "runs" / os.listdir(store / "runs")[0] / "artifacts" / name / f"{version}.json").read_text())
    return (json.dumps(doc["value"], indent=2, ensure_ascii=False) + "\n").encode()


def test_artifacts_and_attachments_read_the_same_bytes_both_ways(served: tuple[Server, str]) -> None:
    server, rid = served
    project, c = server.project, server.client()

    r = _cli(project, "artifacts", "--run-id", rid, "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)["artifacts"]
    assert [(a["node"], a["name"], a["version"], a["tombstoned"]) for a in listed] == [
        ("draft", "draft_report", 1, False), ("gate", "upload_answer", 1, False), ("review", "review_report", 1, False)]
    api = c.get(f"/api/runs/{rid}/artifacts")
    assert api.status_code == 200 and api.json()["artifacts"] == listed
    table = _cli(project, "artifacts", "--run-id", rid)
    assert table.returncode == 0 and "review_report" in table.stdout and "NODE" in table.stdout

    for node, name in (("draft", "draft_report"), ("gate", "upload_answer"), ("review", "review_report")):
        out = project / f"{node}.json"
        w = _cli(project, "artifacts", "--run-id", rid, "--node", node, "-o", str(out))
        assert w.returncode == 0, w.stderr
        printed = _cli(project, "artifacts", "--run-id", rid, "--node", node, text=False)
        got = c.get(f"/api/runs/{rid}/artifacts/{node}/latest")
        assert got.status_code == 200 and got.headers["content-type"].startswith("application/json")
        assert got.headers["x-content-type-options"] == "nosniff"
        expected = _value_bytes(server.store, name, 1)
        assert out.read_bytes() == printed.stdout == got.content == c.get(f"/api/runs/{rid}/artifacts/{node}/1").content == expected
        assert int(got.headers["content-length"]) == len(expected) == next(a["size"] for a in listed if a["node"] == node)
    assert "draft é" in (project / "draft.json").read_text(encoding="utf-8")

    # the attachment: the @file answer's bytes, exact, both ways
    r = _cli(project, "attachments", "--run-id", rid, "--json")
    assert r.returncode == 0, r.stderr
    [rec] = json.loads(r.stdout)["attachments"]
    assert rec["name"] == "doc" and rec["size"] == len(BLOB) and rec["sha256"] == hashlib.sha256(BLOB).hexdigest()
    assert c.get(f"/api/runs/{rid}/attachments").json()["attachments"] == [rec]
    w = _cli(project, "attachments", "--run-id", rid, "doc", "-o", str(project / "copy.bin"))
    assert w.returncode == 0, w.stderr
    piped = _cli(project, "attachments", "--run-id", rid, "doc", text=False)  # a pipe is not a terminal
    assert piped.returncode == 0
    got = c.get(f"/api/runs/{rid}/attachments/doc")
    assert got.status_code == 200 and got.headers["content-length"] == str(len(BLOB))
    assert got.headers["content-type"].startswith("application/octet-stream")
    assert got.headers["content-disposition"].startswith("attachment")
    assert "sandbox" in got.headers["content-security-policy"] and got.headers["x-content-type-options"] == "nosniff"
    assert (project / "copy.bin").read_bytes() == piped.stdout == got.content == BLOB

    # the web timeline links each execution to the artifact it published; the page's cookie reads it
    page = c.get(f"/runs/{rid}")
    assert page.status_code == 200
    href = f"/api/runs/{rid}/artifacts/review/1"
    assert f"class=artifact href='{href}'" in page.text and "artifact review_report v1" in page.text
    with httpx.Client(base_url=server.url, cookies={"iterion_token": server.token}, timeout=30) as browser_like:
        assert browser_like.get(href).content == _value_bytes(server.store, "review_report", 1)

    # the reads need the token, as every other read
    assert server.client(token="").get(f"/api/runs/{rid}/attachments/doc").status_code == 401
    assert server.client(token="").get(f"/api/runs/{rid}/artifacts/draft/1").status_code == 401


def test_binary_is_not_poured_onto_a_terminal(parked: tuple[Path, str]) -> None:
    project, rid = parked
    primary, secondary = pty.openpty()
    env = {"ITERION_STORE_DIR": None}
    try:
        refused = start_cli("attachments", "--run-id", rid, "doc", cwd=project, env=env, stdout=secondary, text=False)
        _, err = refused.communicate(timeout=60)
        assert refused.returncode == 2
        assert b"is binary" in err and b"-o FILE" in err
        forced = start_cli("attachments", "--run-id", rid, "doc", "--force", cwd=project, env=env, stdout=secondary,
                           text=False)
        _, err = forced.communicate(timeout=60)
        assert forced.returncode == 0, err
    finally:
        os.close(primary)
        os.close(secondary)


def test_a_rewind_tombstones_the_dropped_nodes_version(served: tuple[Server, str]) -> None:
    server, rid = served
    project, c = server.project, server.client()
    r = _cli(project, "rewind", "--run-id", rid, "--node", "review", "--json")
    assert r.returncode == 0, r.stderr

    listed = json.loads(_cli(project, "artifacts", "--run-id", rid, "--json").stdout)["artifacts"]
    assert [(a["node"], a["version"], a["tombstoned"]) for a in listed] == [
        ("draft", 1, False), ("gate", 1, False), ("review", 1, True)]
    assert "tombstoned" in _cli(project, "artifacts", "--run-id", rid).stdout
    # "the newest" names no tombstoned version: refused, saying how to read it anyway
    newest = _cli(project, "artifacts", "--run-id", rid, "--node", "review")
    assert newest.returncode == 2 and "tombstoned by a rewind" in newest.stderr and "--version" in newest.stderr
    assert c.get(f"/api/runs/{rid}/artifacts/review/latest").status_code == 409
    # by number it stays readable, for comparison, and says what it is
    old = _cli(project, "artifacts", "--run-id", rid, "--node", "review", "--version", "1", text=False)
    assert old.returncode == 0 and b"tombstoned" in old.stderr
    got = c.get(f"/api/runs/{rid}/artifacts/review/1")
    assert got.status_code == 200 and got.headers["x-iterion-tombstoned"] == "true" and got.content == old.stdout

    r = _cli(project, "resume", "--run-id", rid, "--json")  # the replay publishes a new live version
    assert r.returncode == 4, r.stderr
    got = c.get(f"/api/runs/{rid}/artifacts/review")
    assert [(a["version"], a["tombstoned"]) for a in got.json()["artifacts"]] == [(1, True), (2, False)]
    latest = c.get(f"/api/runs/{rid}/artifacts/review/latest")
    assert latest.status_code == 200 and latest.headers["x-iterion-artifact-version"] == "2"


def _raw_get(server: Server, path: str) -> tuple[int, bytes]:
    """A request line sent as written (no client-side normalisation of ``..``)."""
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {server.token}")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_hostile_names_cannot_leave_the_store(served: tuple[Server, str]) -> None:
    server, rid = served
    c = server.client()
    secret = server.project / "secret.txt"
    secret.write_text("do not serve me\n")
    run_dir = server.store / "runs" / rid
    for path in (f"/api/runs/{rid}/attachments/..", f"/api/runs/{rid}/attachments/../run.json",
                 f"/api/runs/{rid}/attachments/..%2Frun.json", f"/api/runs/{rid}/attachments/%2e%2e%2f%2e%2e%2fsecret.txt",
                 f"/api/runs/{rid}/artifacts/..%2F..%2F/1", f"/api/runs/{rid}/artifacts/../../secret.txt/1",
                 f"/api/runs/{rid}/attachments/.doc", f"/api/runs/{rid}/artifacts/draft/..%2F1"):
        status, body = _raw_get(server, path)
        assert status in (404, 422), (path, status)
        assert b"do not serve me" not in body and b'"workflow_digest"' not in body, path
    # a record that points outside the run's attachments (hand-edited, hostile) is refused
    (run_dir / "attachments" / "evil.json").write_text(json.dumps({
        "version": 1, "name": "evil", "path": str(secret), "original_name": "secret.txt", "mime": "text/plain",
        "size": 16, "sha256": "0" * 64}))
    got = c.get(f"/api/runs/{rid}/attachments/evil")
    assert got.status_code == 409 and "outside the run's attachments" in got.json()["error"]
    assert b"do not serve me" not in got.content
    r = _cli(server.project, "attachments", "--run-id", rid, "evil")
    assert r.returncode == 2 and "do not serve me" not in r.stdout and "outside" in r.stderr
    # an unknown name or version is a plain 404 naming what exists
    missing = c.get(f"/api/runs/{rid}/attachments/nope")
    assert missing.status_code == 404 and "doc" in missing.json()["hint"]
    assert c.get(f"/api/runs/{rid}/artifacts/draft/9").status_code == 404
    assert c.get(f"/api/runs/{rid}/artifacts/nosuchnode").status_code == 404
    assert c.get(f"/api/runs/{rid}/artifacts/draft/zero").status_code == 422
    assert Store(server.store).attachments(rid).get("doc") is not None  # nothing was touched
