"""The HTTP service end to end: a real `iterion server` process, driven with httpx."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.conftest import run_cli
from tests.server.conftest import TOKEN, Server, demo_project, start_server, wait_status

DEMO_NODES = ["gather", "plan", "write", "review", "checks", "save_draft", "stamp", "collect", "approve"]


def test_launch_gate_rewind_cas_answer_and_budget_merge(server: Server) -> None:
    c = server.client()
    r = c.post("/api/runs", json={"file": "demo/demo.bot", "budget": {"max_cost_usd": 5, "max_tokens": 100000}})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    body = wait_status(c, run_id, {"paused_waiting_human"})
    assert body["pending"]["node"] == "approve"
    assert [x["node"] for x in body["executions"]][-1] == "approve"
    assert set(DEMO_NODES) <= {x["node"] for x in body["executions"]}
    assert any("demo-out/draft.md" in x["files"] for x in body["executions"] if x["node"] == "save_draft")
    assert "workspace_checkpoint" not in body["run"]  # no push recorded: no hint, no invented ref

    # the paged timeline and the diff between two boundaries
    page = c.get(f"/api/runs/{run_id}/events", params={"after": 0, "limit": 5}).json()
    assert [e["seq"] for e in page["events"]] == [1, 2, 3, 4, 5] and page["more"] and page["next_after"] == 5
    diff = c.get(f"/api/runs/{run_id}/files", params={"from": "pre:gather:0", "to": "pause:approve:0"}).json()
    assert "demo-out/draft.md" in [f["path"] for f in diff["files"]]
    assert "+++ b/demo-out/draft.md" in diff["diff"]
    assert c.get(f"/api/runs/{run_id}/files", params={"from": "pre:nope:0", "to": "pause:approve:0"}).status_code == 404
    commits = c.get(f"/api/runs/{run_id}/commits").json()
    assert commits["available"] is False and commits["reason"] == "in_place"

    # a wrong answer: the engine's own one-line message, 422, nothing changed
    r = c.post(f"/api/runs/{run_id}/resume", json={"answers": {"approved": "maybe", "note": "x"}})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "answer approved='maybe' is not a bool (true/false)"
    assert server.run_json(run_id)["status"] == "paused_waiting_human"

    # rewind preview lists the files the rewind would restore; it changes nothing
    version = body["run"]["version"]
    r = c.post(f"/api/runs/{run_id}/rewind", json={"node": "save_draft", "dry_run": True})
    assert r.status_code == 200, r.text
    assert "demo-out/draft.md" in r.json()["files"]["in_scope"]
    assert server.run_json(run_id)["version"] == version

    # two operators read the same version; the first rewind wins, the second is a stale CAS: 409
    r = c.post(f"/api/runs/{run_id}/rewind", json={"node": "save_draft", "expected_version": version})
    assert r.status_code == 200, r.text
    assert r.json()["to_node"] == "checks" and r.json()["promoted_from"] == "save_draft"  # the whole fan-out
    assert not (server.project / "demo-out" / "draft.md").exists()
    stale = c.post(f"/api/runs/{run_id}/rewind", json={"node": "write", "expected_version": version})
    assert stale.status_code == 409
    assert "reload the run and retry" in stale.json()["error"] and stale.json()["reason"] == "stale_version"

    # replay to the gate, then answer it over HTTP with a duration-only budget override
    r = c.post(f"/api/runs/{run_id}/resume", json={})
    assert r.status_code == 202, r.text
    wait_status(c, run_id, {"paused_waiting_human"})
    r = c.post(f"/api/runs/{run_id}/resume", json={"answers": {"approved": True, "note": "ship it"},
                                                   "budget": {"max_duration": "4h", "max_tokens": 0}})
    assert r.status_code == 202, r.text
    done = wait_status(c, run_id, {"finished"})
    assert done["run"]["status"] == "finished"
    ask = server.run_json(run_id)["budget"]  # merged per field over the launch ask, persisted
    assert ask["max_duration_s"] == 14400.0
    assert ask["max_cost_usd"] == 5.0 and ask["max_tokens"] == 100000
    assert (server.project / "demo-out" / "published.md").is_file()

    # resuming a finished run is refused with the CLI's message
    r = c.post(f"/api/runs/{run_id}/resume", json={})
    assert r.status_code == 409 and "finished" in r.json()["error"]
    listed = c.get("/api/runs", params={"status": "finished", "workflow": "demo", "limit": 5}).json()
    assert [x["id"] for x in listed["runs"]] == [run_id]


def test_auth_and_bad_requests(server: Server) -> None:
    anon = server.client(token="")
    assert anon.get("/healthz").status_code == 200
    assert anon.get("/readyz").json() == {"ready": True}  # ready or not, and nothing about paths
    assert server.client().get("/readyz").json()["store"] == str(server.store)
    for path in ("/api/runs", "/api/runs/whatever", "/api/nope"):
        r = anon.get(path)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert server.client(token="x" * 26).get("/api/runs").status_code == 401
    assert anon.post("/api/runs", json={"file": "demo/demo.bot"}).status_code == 401
    assert anon.get("/").status_code == 401  # the page too

    c = server.client()
    r = c.get("/api/runs/0123456789abcdef")
    assert r.status_code == 404 and r.json()["error"].startswith("run 0123456789abcdef not found")
    assert c.get("/api/nope").status_code == 404
    assert c.get("/api/runs", params={"status": "bogus"}).status_code == 422
    r = c.post("/api/runs", json={"file": "demo/demo.bot", "bogus": 1})
    assert r.status_code == 422 and "unknown field 'bogus'" in r.json()["error"]
    r = c.post("/api/runs", json={"file": "../../etc/passwd"})
    assert r.status_code == 422 and "outside the project" in r.json()["error"]
    r = c.post("/api/runs", json={"file": "demo/demo.bot", "budget": {"max_duration": "soon"}})
    assert r.status_code == 422
    r = c.post("/api/runs", json={"file": "demo/demo.bot", "vars": {"nope": "1"}})
    assert r.status_code == 422 and r.json()["error"].startswith("unknown var 'nope'")
    (server.project / "broken.bot").write_text("workflow w:\n  entry: nowhere\n")
    r = c.post("/api/runs", json={"file": "broken.bot"})
    assert r.status_code == 422 and "has 1 validation error(s); no run was created" in r.json()["error"], r.text
    assert r.json()["diagnostics"][0]["severity"] == "error"
    r = c.post("/api/runs", json={"file": "demo/demo.bot", "backend": "bogus"})
    assert r.status_code == 422 and r.json()["error"].startswith("--backend: unknown backend 'bogus'")
    r = c.post("/api/runs", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"].startswith("request body is not valid JSON")
    r = c.post("/api/runs", content=b"file=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415  # a cross-site form cannot drive the API
    r = c.post("/api/runs", content=b"{" + b" " * (2 * 1024 * 1024) + b"}", headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    r = c.post("/api/runs/0123456789abcdef/rewind", json={"node": "a", "auto": True})
    assert r.status_code == 422 and r.json()["error"] == "give exactly one of --node NODE or --auto"
    assert not (server.store / "runs").exists() or not any((server.store / "runs").iterdir())


def test_token_generated_saved_0600_and_public_bind_refused(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "p")
    s = start_server(project, token=None)
    try:
        saved = s.store / "server" / "token"
        assert saved.read_text().strip() == s.token and len(s.token) >= 32
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        assert s.client().get("/api/runs").status_code == 200
    finally:
        s.stop()
    proc = run_cli("server", "--host", "0.0.0.0", "--port", "0", cwd=project, env={"ITERION_SERVER_TOKEN": None},
                   timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: refusing to bind 0.0.0.0: a non-loopback address needs a token")
    assert proc.stdout == ""
    assert TOKEN not in proc.stderr


def test_state_changes_need_the_token_in_a_header_and_this_origin(server: Server) -> None:
    """A cookie alone, another origin, an empty or non-JSON body, a deeply nested body: refused
    before anything is read or written (docs/technical/web-security.md)."""
    import httpx

    path = "/api/runs/0123456789abcdef/cancel"  # no such run: a request that got through says 404
    cookie = httpx.Client(base_url=server.url, cookies={"iterion_token": server.token}, timeout=30)
    assert cookie.get("/api/runs").status_code == 200  # reads: the cookie is enough
    r = cookie.post(path, json={})
    assert r.status_code == 403 and r.json()["error"] == "a POST needs the token in a header, not only in the cookie"
    header = {"X-Iterion-Token": server.token}
    assert cookie.post(path, json={}, headers=header).status_code == 404  # the page's own way
    c = server.client()
    own = server.url.replace("http://", "")
    for headers in ({"Origin": "http://127.0.0.1:1"}, {"Origin": f"https://{own}"}, {"Origin": "null"},
                    {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": server.url, "Sec-Fetch-Site": "same-site"}):
        r = c.post(path, json={}, headers=headers)
        assert r.status_code == 403 and r.json()["error"].startswith("refused a cross-site request"), (headers, r.text)
    assert c.get("/api/runs", headers={"Origin": "http://127.0.0.1:1"}).status_code == 403
    for headers in ({"Origin": server.url}, {"Sec-Fetch-Site": "same-origin", "Origin": server.url},
                    {"Sec-Fetch-Site": "none"}):
        assert c.post(path, json={}, headers=headers).status_code == 404, headers

    r = c.post(path)  # an empty body is no longer {}
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    r = c.post(path, content=b"", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "request body is empty: a JSON object is required"
    r = c.post(path, content=b'{"wait": 0}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = c.post(path, content=b"[]", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "request body must be a JSON object"
    for deep in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"[" * 200_000):
        r = c.post(path, content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["error"] == "request body nests deeper than 64 levels"
    # brackets inside strings are text, not nesting
    r = c.post(path, json={"reason": "[" * 1000, "wait": 0})
    assert r.status_code == 404
    assert server.proc.poll() is None
