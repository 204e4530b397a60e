"""Rewind is offered per execution, and only where it can succeed (issue 34).

In process: for every node of the demo, the page offers a rewind exactly when `iterion rewind
--node NODE --dry-run` (``rewind_run``) accepts it, parked and finished. In a real browser over a
real `iterion server`: a node that ran twice offers it on its latest row only (the other says
which iteration), the row's button previews and performs a rewind to that node, and the rows the
rewind dropped offer none."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.rewind.errors import RewindError
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.server.service import Service
from iterion.store import RunStatus, Store
from iterion.store.errors import StatusRefusedError
from tests.conftest import FIXTURES
from tests.server.conftest import Server, demo_project, start_server, wait_status


def _accepted(store: Store, run_id: str, node: str) -> bool:
    try:
        rewind_run(store, RewindRequest(run_id=run_id, node=node, dry_run=True))
    except (RewindError, StatusRefusedError):
        return False
    return True


def test_offered_exactly_where_the_rewind_accepts(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(FIXTURES / "demo", ws / "demo")
    monkeypatch.chdir(ws)
    store = Store.open(None, ws)
    run = launch_run(store, ws / "demo" / "demo.bot", LaunchOptions(workspace=ws, watch=False))
    assert run.status is RunStatus.PAUSED_WAITING_HUMAN, run.error
    svc = Service(store, ws)
    view = svc.run_view(run.run_id)
    nodes = list(svc.current_source(svc.load(run.run_id)).workflow.nodes)
    offered = {r["node"] for r in view["executions"] if r["rewind"]["offered"]}
    assert offered == {n for n in nodes if _accepted(store, run.run_id, n)}
    assert {"write", "approve", "save_draft"} <= offered and view["rewind_refused"] is None
    # one row per node offers it: the latest execution, the one the rewind goes back to
    writes = [r for r in view["executions"] if r["node"] == "write"]
    assert [(r["iteration"], r["rewind"]["offered"]) for r in writes] == [(0, False), (1, True)]
    assert writes[0]["rewind"]["latest"] == 1

    done = resume_run(store, run.run_id, ResumeOptions(answers={"approved": True, "note": "ok"}))
    assert done.status is RunStatus.FINISHED, done.error
    view = svc.run_view(run.run_id)
    assert not any(r["rewind"]["offered"] for r in view["executions"])
    assert "finished" in view["rewind_refused"]
    assert not any(_accepted(store, run.run_id, n) for n in nodes)


@pytest.fixture(scope="module")
def parked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    server = start_server(demo_project(tmp_path_factory.mktemp("weboffers") / "project"))
    try:
        c = server.client()
        run_id = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
        wait_status(c, run_id, {"paused_waiting_human"})
        yield server, run_id
    finally:
        server.stop()


def test_each_row_offers_its_own_rewind(parked: tuple[Server, str], browser: Any) -> None:
    server, run_id = parked
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server.url}/?token={server.token}")
    page.goto(f"{server.url}/runs/{run_id}")
    first, second = page.locator("tr.execution[data-node='write']").all()
    assert first.locator("button.preview").count() == 0
    assert "rewind: on iteration 1" in first.locator(".rewind-note").inner_text()
    button = second.locator("button.preview")
    assert button.inner_text() == "preview rewind to iteration 1"
    button.focus()
    page.keyboard.press("Enter")  # by keyboard
    page.wait_for_selector("#rewind-do")
    assert page.locator("#rewind-do").inner_text() == "Rewind to write"
    assert page.locator("#rewind-node").input_value() == "write"
    page.click("#rewind-do")
    page.wait_for_selector("#rewind-result")
    assert "-> write" in page.locator("#rewind-result").inner_text()
    page.wait_for_selector("#undo-offer")
    # the rows the rewind dropped are marked and offer nothing; earlier rows still do
    dropped = page.locator("tr.execution.rewound")
    assert dropped.count() >= 2 and dropped.locator("button.preview").count() == 0
    assert page.locator("tr.execution[data-node='plan'] button.preview").count() == 1
    assert server.run_json(run_id)["status"] == "paused_operator"
    page.close()
