"""The web page against another site, and the web rewind as the CLI's, in a real headless Chromium.

A page served from another port of 127.0.0.1 is the same *site* (the SameSite=Strict cookie goes
along) but another *origin*: it must not be able to cancel, pause, resume or rewind a run. The
page's own buttons still work; its rewind preview is the CLI's dry run, an overwritten edit of
the person called out, and "Undo this rewind" puts that edit back on disk.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import run_cli, write_bot
from tests.server.conftest import Server, demo_project, start_server, wait_status

WAITS = """
tool first:
  command: "i=0; while [ ! -e go ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; echo one > first.txt"

tool second:
  command: "echo two > second.txt"

workflow waits:
  entry: first
  first -> second
  second -> done
"""

ATTACK = """<!doctype html><html><body>
<iframe name=sink style='display:none'></iframe>
<form id=f method=POST enctype=text/plain target=sink action='{target}/api/runs/{a}/cancel'>
<input name='{{"wait":0,"x":"' value='"}}'></form>
<script>
var target = '{target}', tries = [], answered = 0;
function hit(run, action, init) {{
  tries.push(fetch(target + '/api/runs/' + run + '/' + action, init)
    .then(function(){{ answered++; }}, function(){{}}));
}}
[['{a}', 'cancel'], ['{a}', 'rewind'], ['{b}', 'resume'], ['{a}', 'rewind/undo'], ['{c}', 'pause'],
 ['{c}', 'cancel']]
  .forEach(function(x) {{
    hit(x[0], x[1], {{method: 'POST', mode: 'no-cors', credentials: 'include'}});  // an empty body
    hit(x[0], x[1], {{method: 'POST', mode: 'no-cors', credentials: 'include',
                      headers: {{'Content-Type': 'text/plain'}}, body: '{{"node":"save_draft","wait":0}}'}});
    hit(x[0], x[1], {{method: 'POST', credentials: 'include',  // needs a preflight: never granted
                      headers: {{'Content-Type': 'application/json'}}, body: '{{"node":"save_draft"}}'}});
  }});
document.getElementById('f').submit();
Promise.all(tries).then(function(){{ document.title = 'done ' + answered; }});
</script></body></html>"""


def _serve_page(html: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    body = html.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str, str]]:
    """A waits on its human gate; B was cancelled (so a resume would start it again); C is
    running (its first node waits for a `go` file), so a pause or a cancel would act on it."""
    project = demo_project(tmp_path_factory.mktemp("guard") / "project")
    write_bot(project / "wf", WAITS, name="waits")
    server = start_server(project)
    try:
        c = server.client()
        a = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
        wait_status(c, a, {"paused_waiting_human"})
        b = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
        wait_status(c, b, {"paused_waiting_human"})
        assert c.post(f"/api/runs/{b}/cancel", json={"wait": 0}).json()["status"] == "cancelled"
        running = c.post("/api/runs", json={"file": "wf/waits.bot", "workspace": "wf"}).json()["run_id"]
        yield server, a, b, running
    finally:
        (project / "wf" / "go").write_text("")  # lets C's tool end
        server.stop()


def _state(server: Server, run_id: str) -> tuple[str, int, int, list[str]]:
    doc = server.run_json(run_id)
    run_dir = server.store / "runs" / run_id
    events = (run_dir / "events.jsonl").read_text().count("\n")
    return doc["status"], doc["version"], events, sorted(p.name for p in run_dir.iterdir())  # no control request


def test_a_page_on_another_port_cannot_act_on_runs(runs: tuple[Server, str, str, str], browser: Any) -> None:
    server, a, b, c = runs
    assert server.run_json(c)["status"] == "running"
    before = {r: _state(server, r) for r in (a, b, c)}
    draft = server.project / "demo-out" / "draft.md"
    kept = draft.read_bytes()
    httpd, origin = _serve_page(ATTACK.format(target=server.url, a=a, b=b, c=c))
    try:
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(f"{server.url}/?token={server.token}")  # the person signed in: the cookie is set
        assert any(c["name"] == "iterion_token" for c in ctx.cookies())
        page.goto(f"{origin}/")
        page.wait_for_function("document.title.startsWith('done')", timeout=30_000)
        # every no-cors request reached the server and was answered (12 of them); the CORS ones died
        # at their preflight: the server heard them all and acted on none
        assert page.title() == "done 12"
        page.wait_for_timeout(500)  # the form's POST, in its hidden frame
        ctx.close()
    finally:
        httpd.shutdown()
    assert {r: _state(server, r) for r in (a, b, c)} == before
    assert draft.read_bytes() == kept
    assert not (server.store / "runs" / a / "rewind-undo.json").exists()


def test_web_rewind_is_the_cli_rewind_with_undo(runs: tuple[Server, str, str, str], browser: Any) -> None:
    server, a, b, c = runs
    draft = server.project / "demo-out" / "draft.md"
    draft.write_text("my own edit\n")  # the person edits a file the run produced
    cli = run_cli("rewind", "--run-id", a, "--node", "save_draft", "--dry-run", "--json",
                  "--store-dir", str(server.store), cwd=server.project, timeout=120)
    assert cli.returncode == 0, cli.stderr
    dry = json.loads(cli.stdout)
    assert dry["files"]["overwritten"] == ["demo-out/draft.md"]

    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.goto(f"{server.url}/runs/{a}?token={server.token}")
    box = page.locator("#rewind-preview").bounding_box()
    assert box is not None and box["y"] + box["height"] < 800  # above the timeline, no scrolling
    page.select_option("#rewind-node", "save_draft")
    page.click("#rewind-preview")
    page.wait_for_selector("#rewind-preview-report")
    shown = page.locator("#rewind-preview-report").inner_text()
    assert "Your edits this rewind would overwrite" in shown
    assert page.locator("#rewind-overwritten li").all_inner_texts() == dry["files"]["overwritten"]
    assert page.locator("#rewind-removed li").all_inner_texts() == dry["files"]["removed"]
    assert page.locator("#rewind-restored li").all_inner_texts() == dry["files"]["restored"]
    assert f"-> {dry['to_node']}" in shown and ", ".join(dry["dropped_nodes"]) in shown
    do = page.locator("#rewind-do").bounding_box()
    assert do is not None and do["y"] + do["height"] < 800  # the button that performs it is beside it
    assert draft.read_text() == "my own edit\n" and server.run_json(a)["status"] == "paused_waiting_human"

    page.click("#rewind-do")
    page.wait_for_selector("#rewind-result")
    assert "Your edits this rewind overwrote" in page.locator("#rewind-result").inner_text()
    page.wait_for_selector("#rewind-undo")  # offered with what happened
    assert server.run_json(a)["status"] == "paused_operator"
    assert not draft.exists()  # the rewind removed what save_draft made, the person's edit with it

    page.reload()  # still offered after a reload: for as long as `rewind --undo` would take it
    assert "demo-out/draft.md" in page.locator("#undo-offer").inner_text()
    page.click("#rewind-undo")
    page.wait_for_selector("#undo-result")
    assert "undid the rewind" in page.locator("#undo-result").inner_text(), page.locator("#undo-result").inner_text()
    assert draft.read_text() == "my own edit\n"  # back on disk
    assert server.run_json(a)["status"] == "paused_waiting_human"
    events = (server.store / "runs" / a / "events.jsonl").read_text()
    assert '"run_rewind_undone"' in events
    page.wait_for_function("!document.querySelector('#undo-offer')")  # nothing left to undo

    # the page's own operator buttons still work: pause C (running), cancel A, resume B
    page.goto(f"{server.url}/runs/{c}")
    page.click("#op-pause")
    page.wait_for_function("document.querySelector('#op-result') && "
                           "document.querySelector('#op-result').textContent.startsWith('pause: ')")
    (server.project / "wf" / "go").write_text("")  # the first node ends: the run pauses at the boundary
    wait_status(server.client(), c, {"paused_operator"})
    page.goto(f"{server.url}/runs/{a}")
    page.wait_for_selector("#op-cancel")
    page.click("#op-cancel")
    page.wait_for_function("document.querySelector('#status').textContent.includes('cancelled')", timeout=60_000)
    assert server.run_json(a)["status"] == "cancelled"
    page.goto(f"{server.url}/runs/{b}")
    page.click("#op-resume")
    wait_status(server.client(), b, {"paused_waiting_human"})
    page.close()
