"""The run page's operator actions in a real headless browser (Debian's chromium via playwright):
launch from the run list's form, a file diff opened from an execution row (by keyboard), the
workflow graph's statuses, "Resume with updated workflow (force)" after a prompt edit, and a
screenshot per page at 1280 and 390 px that fails when the page is blank."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Server, demo_project, start_server, wait_status
from tests.server.test_web import png_distinct_bytes


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    project = demo_project(tmp_path_factory.mktemp("webactions") / "project")
    # a copy the force test edits: the other tests keep the demo as shipped
    shutil.copy(project / "demo" / "demo.bot", project / "demo" / "edited.bot")
    shutil.copy(project / "demo" / "demo.script.yaml", project / "demo" / "edited.script.yaml")
    server = start_server(project)
    try:
        c = server.client()
        run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
        wait_status(c, run_id, {"paused_waiting_human"})
        yield server, run_id
    finally:
        server.stop()


def _page(browser: object, server: Server, width: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
    page.goto(f"{server.url}/?token={server.token}")
    return page


def test_graph_colours_nodes_by_status(served: tuple[Server, str], browser: object) -> None:
    server, run_id = served
    page = _page(browser, server, 1280)
    page.goto(f"{server.url}/runs/{run_id}")
    status = {n: page.locator(f"#graph g.gnode[data-node='{n}']").get_attribute("data-status")
              for n in ("gather", "save_draft", "approve", "publish", "done")}
    assert status == {"gather": "finished", "save_draft": "finished", "approve": "paused", "publish": "pending",
                      "done": "terminal"}
    fills = {page.locator(f"#graph g.gnode[data-node='{n}'] rect").get_attribute("fill") for n in ("gather", "approve")}
    assert len(fills) == 2  # finished and paused are told apart by colour
    assert page.locator("#graph path.edge").count() >= 13
    page.close()


def test_file_diff_opened_from_a_row_by_keyboard(served: tuple[Server, str], browser: object) -> None:
    server, run_id = served
    page = _page(browser, server, 1280)
    page.goto(f"{server.url}/runs/{run_id}")
    assert page.locator("#diff-panel").is_hidden()
    button = page.locator("tr.execution[data-node='save_draft'] button.diff")
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#diff-text span.d-add")
    assert "save_draft" in page.locator("#diff-title").inner_text()
    assert "demo-out/draft.md" in page.locator("#diff-files").inner_text()
    added = page.locator("#diff-text span.d-add").all_inner_texts()
    draft = (server.project / "demo-out" / "draft.md").read_text().splitlines()
    assert any(line[1:] == draft[0] for line in added)  # the file's own text, as added lines
    assert page.evaluate("document.activeElement.id") == "diff-panel"  # focus follows the opened diff
    page.locator("#diff-close").click()
    assert page.locator("#diff-panel").is_hidden()
    page.close()


def test_launch_from_the_form(served: tuple[Server, str], browser: object, tmp_path: Path) -> None:
    server, _ = served
    page = _page(browser, server, 1280)
    files = page.locator("#launch-file option").all_inner_texts()
    assert "demo/demo.bot" in files and "demo/edited.bot" in files
    page.select_option("#launch-file", "demo/demo.bot")
    assert page.locator("#launch-vars input").count() == 2  # topic and out, from its declarations
    assert page.locator("#launch-vars input[name=topic]").get_attribute("placeholder") == "rivers"
    page.fill("#launch-vars input[name=topic]", "lakes")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"approve": {"approved": True, "note": "from the form"}}))
    page.set_input_files("#launch-answers", str(answers))
    page.click("#launch-submit")
    page.wait_for_url("**/runs/*")
    run_id = page.url.rsplit("/", 1)[1]
    body = wait_status(server.client(), run_id, {"finished"})
    assert body["run"]["vars"]["topic"] == "lakes"
    assert "from the form" in (server.project / "demo-out" / "published.md").read_text() or \
        body["checkpoint"]["outputs"]["approve"]["note"] == "from the form"
    page.close()


def test_launch_form_shows_a_refusal(served: tuple[Server, str], browser: object, tmp_path: Path) -> None:
    server, _ = served
    page = _page(browser, server, 1280)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    page.set_input_files("#launch-answers", str(bad))
    page.click("#launch-submit")
    page.wait_for_selector("#launch-result.err")
    assert "JSON object" in page.locator("#launch-result").inner_text()
    page.close()


def test_force_resume_after_a_prompt_edit(served: tuple[Server, str], browser: object) -> None:
    server, _ = served
    c = server.client()
    run_id = c.post("/api/runs", json={"file": "demo/edited.bot"}).json()["run_id"]
    wait_status(c, run_id, {"paused_waiting_human"})
    assert c.post(f"/api/runs/{run_id}/cancel", json={"wait": 5}).status_code == 200
    wait_status(c, run_id, {"cancelled"})
    recorded = server.run_json(run_id)["workflow_digest"]

    page = _page(browser, server, 1280)
    page.goto(f"{server.url}/runs/{run_id}")
    assert page.locator("#source-change").count() == 0  # unchanged: no force action
    src = server.project / "demo" / "edited.bot"
    src.write_text(src.read_text().replace("Review this draft about", "Review, strictly, this draft about"))
    page.reload()
    box = page.locator("#source-change")
    assert "The workflow changed" in box.inner_text()
    assert "review_user" in page.locator("#source-changes").inner_text()  # the declaration diff of rewind --auto
    assert page.locator("#source-pivot").inner_text() == "review"
    # a plain resume is refused, naming the change; the force action goes through
    page.locator("#op-resume").click()
    page.wait_for_selector("#op-result.err")
    assert "changed" in page.locator("#op-result").inner_text()
    assert server.run_json(run_id)["status"] == "cancelled"
    page.locator("#op-force").click()
    body = wait_status(c, run_id, {"paused_waiting_human", "finished"})
    assert server.run_json(run_id)["workflow_digest"] != recorded
    events = c.get(f"/api/runs/{run_id}/events").json()["events"]
    assert any(e["type"] == "run_resumed" for e in events)
    deadline = time.monotonic() + 30  # the page follows the run: the force action goes away
    while time.monotonic() < deadline and page.locator("#source-change").count():
        time.sleep(0.2)
    assert page.locator("#source-change").count() == 0, body["run"]["status"]

    # waiting on a person: the answer form carries the force instead of a button
    assert body["run"]["status"] == "paused_waiting_human"
    src.write_text(src.read_text().replace("is ready", "is ready, really"))
    page.reload()
    assert page.locator("#op-force").count() == 0
    assert "approve_text" in page.locator("#source-changes").inner_text()
    page.select_option("#answer-form select[name=approved]", "true")
    page.fill("#answer-form input[name=note]", "forced")
    page.check("#answer-force")
    page.click("#answer-submit")
    wait_status(c, run_id, {"finished"})
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_screenshots_are_not_blank(served: tuple[Server, str], browser: object, tmp_path: Path, width: int) -> None:
    server, run_id = served
    page = _page(browser, server, width)
    for name, url in (("runs", "/"), ("run", f"/runs/{run_id}")):
        page.goto(server.url + url)
        page.wait_for_load_state("load")
        shot = page.screenshot(full_page=True)
        (tmp_path / f"{name}-{width}.png").write_bytes(shot)
        assert png_distinct_bytes(shot) > 40, f"the {name} page at {width}px looks blank"
        # nothing wider than the screen: tables scroll inside themselves, the graph scales down
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} overflows at {width}px"
    page.close()
