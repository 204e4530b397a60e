"""Edits made while a run waits at a gate are the person's, not the next node's (issue 34): a real
run through a real `iterion server` parks at its gate, the test edits files, the run is resumed;
the API's ``pause_edits`` and the page's "edited by you" row carry those files, with their diff,
and no execution's files include them. Also the rows' own rewind offers (issue 34): on the
latest execution of a node only, none once the run is finished."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import git, make_checkout
from tests.server.conftest import Server, start_server, wait_status

FLOW = '''schema answer:
  ok: bool
tool make:
  command: "echo one > a.txt"
human gate:
  instructions: "Go on?"
  output: answer
tool more:
  command: "echo two > b.txt"
workflow flow:
  entry: make
  make -> gate
  gate -> more
  more -> done
'''


@pytest.fixture(scope="module")
def paused_and_edited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    project = make_checkout(tmp_path_factory.mktemp("webpause") / "project")
    (project / "flow.bot").write_text(FLOW)
    git(project, "add", "-A")
    git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "flow")
    server = start_server(project)
    try:
        c = server.client()
        run_id = c.post("/api/runs", json={"file": "flow.bot"}).json()["run_id"]
        wait_status(c, run_id, {"paused_waiting_human"})
        # the person's work while the run waits: one file changed, one made
        (project / "a.txt").write_text("one, edited by hand\n")
        (project / "mine.txt").write_text("my notes\n")
        version = server.run_json(run_id)["version"]
        r = c.post(f"/api/runs/{run_id}/resume", json={"answers": {"ok": True}, "expected_version": version})
        assert r.status_code == 202, r.text
        wait_status(c, run_id, {"finished"})
        yield server, run_id
    finally:
        server.stop()


def test_the_api_attributes_pause_edits_to_the_person(paused_and_edited: tuple[Server, str]) -> None:
    server, run_id = paused_and_edited
    body = server.client().get(f"/api/runs/{run_id}").json()
    [edits] = body["pause_edits"]
    assert (edits["node"], edits["iteration"], edits["stopped"]) == ("gate", 0, "pause")
    assert (edits["from_label"], edits["to_label"]) == ("pause:gate:0", "resume:gate:0")
    assert sorted(edits["files"]) == ["a.txt", "mine.txt"]
    files = {r["node"]: r["files"] for r in body["executions"]}
    assert files == {"make": ["a.txt"], "gate": [], "more": ["b.txt"]}  # nobody else claims them
    gate = next(r for r in body["executions"] if r["node"] == "gate")
    assert [(g["from_label"], g["to_label"]) for g in gate["diff_segments"]] == [
        ("pre:gate:0", "pause:gate:0"), ("resume:gate:0", "nodes:gate:0")]
    # the diff between the two recorded states is the person's edit, through the /files endpoint
    diff = server.client().get(f"/api/runs/{run_id}/files", params={"from": edits["from"], "to": edits["to"]}).json()
    assert sorted(f["path"] for f in diff["files"]) == ["a.txt", "mine.txt"]
    assert "+one, edited by hand" in diff["diff"] and "+my notes" in diff["diff"]


def test_the_page_shows_an_edited_by_you_row_with_its_diff(paused_and_edited: tuple[Server, str], browser: Any) -> None:
    server, run_id = paused_and_edited
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/?token={server.token}")
    page.goto(f"{server.url}/runs/{run_id}")
    rows = page.locator("#timeline tbody tr").evaluate_all(
        "rows => rows.map(r => r.className.includes('pause-edits') ? 'you' : r.getAttribute('data-node'))")
    assert rows == ["make", "gate", "you", "more"]  # placed where the pause began, before the next node
    mine = page.locator("#timeline tr.pause-edits")
    assert "edited by you" in mine.inner_text() and "(2 files)" in mine.inner_text()
    assert "mine.txt" in mine.locator("td.files").inner_text()
    assert "mine.txt" not in page.locator("tr.execution[data-node='more'] td.files").inner_text()
    assert page.locator("tr.execution[data-node='gate'] button.diff").count() == 0  # the gate changed nothing
    button = mine.locator("button.diff")
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#diff-text span.d-add")
    assert "you while the run was paused at gate" in page.locator("#diff-title").inner_text()
    assert {t.split()[-1] for t in page.locator("#diff-files li").all_inner_texts()} == {"a.txt", "mine.txt"}
    assert any(t[1:] == "my notes" for t in page.locator("#diff-text span.d-add").all_inner_texts())
    page.close()


def test_a_finished_run_offers_no_rewind(paused_and_edited: tuple[Server, str], browser: Any) -> None:
    server, run_id = paused_and_edited
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/?token={server.token}")
    page.goto(f"{server.url}/runs/{run_id}")
    assert page.locator("button.preview").count() == 0
    assert "finished" in page.locator("#rewind-refused").inner_text()
    assert page.locator("#rewind-pick").is_hidden()
    body = server.client().get(f"/api/runs/{run_id}").json()
    assert "rewind" not in body["executions"][0]  # the offers are the page's (they compile the workflow)
    page.close()


def test_a_failure_then_resume_splits_like_a_pause(tmp_path: Any) -> None:
    """fail: opens the interval as pause: does; the retried execution starts from its resume:."""
    from iterion.server import timeline as tl
    from iterion.store import Store

    def b(seq: int, label: str) -> dict[str, Any]:
        return {"label": label, "state": f"s{seq}", "seq": seq, "time": "", "node": "t", "iteration": 0}

    bounds = [b(3, "pre:t:0"), b(5, "fail:t:0"), b(8, "resume:t:0"), b(10, "nodes:t:0")]
    rows: list[dict[str, Any]] = [{"node": "t", "iteration": 0, "start_seq": 4},
                                  {"node": "t", "iteration": 0, "start_seq": 9}]
    store = Store(tmp_path / "store")
    doc: Any = SimpleNamespace(id="r1")  # a run with no recorded state: the states above are made up
    tl.attach_files(store, doc, rows, bounds)
    assert [(g["from_label"], g["to_label"]) for g in rows[0]["diff_segments"]] == [("pre:t:0", "fail:t:0")]
    assert [(g["from_label"], g["to_label"]) for g in rows[1]["diff_segments"]] == [("resume:t:0", "nodes:t:0")]
    [gap] = tl.pause_edits(store, doc, bounds)
    assert (gap["stopped"], gap["from_label"], gap["to_label"], gap["seq"]) == ("fail", "fail:t:0", "resume:t:0", 5)
