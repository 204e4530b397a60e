"""The web timeline in a real headless browser (Debian's chromium, driven by playwright over CDP).

Few and fast on purpose: one server, one run of the demo, one browser for the whole module.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iterion.store import Store
from iterion.store.events import RUN_WORKSPACE_CHECKPOINT
from tests.server.conftest import Server, demo_project, start_server, wait_status

DEMO_NODES = ["gather", "plan", "write", "review", "checks", "save_draft", "stamp", "collect", "approve"]


def png_distinct_bytes(png: bytes) -> int:
    """How many distinct byte values the decoded scanlines hold: a handful for a blank (one colour,
    plus the PNG filter-type bytes), well over a hundred for a rendered page."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind = png[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    server = start_server(demo_project(tmp_path_factory.mktemp("web") / "project"))
    try:
        c = server.client()
        run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
        wait_status(c, run_id, {"paused_waiting_human"})
        yield server, run_id
    finally:
        server.stop()


def test_run_page_timeline_preview_and_answer(served: tuple[Server, str], browser: object, tmp_path: Path) -> None:
    server, run_id = served
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    page.goto(f"{server.url}/?token={server.token}")  # the token once from the URL, then a cookie
    assert "?token" not in page.url
    assert page.locator(f"#runs tr[data-run='{run_id}']").count() == 1

    ref = f"refs/iterion/runs/{run_id}/checkpoints/1"  # as the engine's push records it (real event log)
    Store(server.store).events(run_id).append(RUN_WORKSPACE_CHECKPOINT, payload={
        "ref": ref, "commit": "b" * 40, "remote": "origin", "time": datetime.now(UTC).isoformat()})
    page.goto(f"{server.url}/runs/{run_id}")
    assert f"git fetch origin {ref}" in page.locator("#recovery-hint").inner_text()
    nodes = page.locator("#timeline td.node").all_inner_texts()
    assert set(DEMO_NODES) <= set(nodes) and nodes.count("write") == 2  # the review loop ran twice
    assert page.locator("#boundaries tbody tr").count() >= 2 * len(DEMO_NODES)
    assert "demo-out/draft.md" in page.locator("tr.execution[data-node='save_draft'] td.files").inner_text()

    # a screenshot that is not blank (and the check itself tells a blank page apart)
    shot = page.screenshot(full_page=True)
    (tmp_path / "run-page.png").write_bytes(shot)
    assert png_distinct_bytes(shot) > 40
    blank = browser.new_page(viewport={"width": 400, "height": 300})  # type: ignore[attr-defined]
    blank.set_content("<html><body style='background:#fff'></body></html>")
    assert png_distinct_bytes(blank.screenshot()) <= 8
    blank.close()

    # the rewind preview lists the files, with a button that performs it (not pressed here)
    page.locator("tr.execution[data-node='save_draft'] button.preview").click()
    page.wait_for_selector("#rewind-removed li")
    assert "demo-out/draft.md" in page.locator("#rewind-removed").inner_text()
    assert page.locator("#rewind-do").inner_text() == "Rewind to save_draft"
    assert server.run_json(run_id)["status"] == "paused_waiting_human"  # a preview changes nothing
    assert (server.project / "demo-out" / "reviewed.txt").exists()

    # the button performs it; the Resume button replays to the gate, live on the page
    page.click("#rewind-do")
    page.wait_for_selector("#rewind-result")
    assert "-> checks (promoted from save_draft" in page.locator("#rewind-result").inner_text()  # the whole fan-out
    page.wait_for_selector("#op-resume")
    assert not (server.project / "demo-out" / "reviewed.txt").exists()  # what the dropped nodes made went back
    page.click("#op-resume")
    page.wait_for_selector("#answer-form", timeout=90_000)

    # the pending question's form answers the gate; the page follows the run live to its end
    assert "Publish it to demo-out/published.md?" in page.locator("#question .asks").inner_text()
    # nothing pre-selected (issue 34 point 3): submitted as loaded, the browser stops it, nothing moves
    approved = "#answer-form select[name='approved']"
    assert page.locator(approved).input_value() == ""
    page.fill("#answer-form input[name='note']", "ship it <b>now</b>")
    page.click("#answer-submit")
    assert page.evaluate(f"document.querySelector(\"{approved}\").validity.valueMissing")
    assert page.locator("#answer-busy").count() == 0
    assert server.run_json(run_id)["status"] == "paused_waiting_human"
    page.select_option(approved, "true")
    page.click("#answer-submit")
    page.wait_for_function("document.querySelector('#status') && "
                           "document.querySelector('#status').textContent.includes('finished')", timeout=90_000)
    assert server.run_json(run_id)["status"] == "finished"
    published = server.project / "demo-out" / "published.md"
    assert published.is_file()
    page.close()


def test_the_answer_form_preselects_no_bool_and_no_enum_value() -> None:
    from iterion.server.web import live_section

    detail = {"run": {"id": "r1", "name": "n", "status": "paused_waiting_human", "workflow": "w", "version": 3},
              "pending": {"node": "ask", "questions": {"instructions": "Pick", "fields": [
                  {"name": "ok", "type": "bool"}, {"name": "level", "type": "string", "enum": ["low", "high"]}]}}}
    html = live_section(detail)
    for name, values in (("ok", ["true", "false"]), ("level", ["low", "high"])):
        select = html[html.index(f"<select name='{name}'"):]
        select = select[:select.index("</select>")]
        assert "required" in select and "<option value='' selected disabled>" in select
        assert all(f"value='{v}' selected" not in select and f"value={v} selected" not in select for v in values)
        assert all(v in select for v in values)
