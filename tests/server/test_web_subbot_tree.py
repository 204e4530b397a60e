"""The subbot tree on the web pages, in a real headless browser over a real `iterion server`: a
parent whose subbot child parks at a human gate. The parent's page links its child (list and
graph) and says the question is the child's; the child's page links its parent; the run list
nests the child under its parent; answering on the parent's page finishes both, as
`iterion resume --run-id PARENT` does (tests/subbots/test_e2e.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git, make_checkout
from tests.server.conftest import Server, start_server, wait_status
from tests.server.test_web import png_distinct_bytes
from tests.subbots.conftest import CHILD, PARENT


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    project = make_checkout(tmp_path_factory.mktemp("webtree") / "project")
    (project / "bots").mkdir()
    (project / "bots" / "child.bot").write_text(CHILD)
    (project / "parent.bot").write_text(PARENT)
    git(project, "add", "-A")
    git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "bots")
    server = start_server(project)
    try:
        c = server.client()
        parent = c.post("/api/runs", json={"file": "parent.bot"}).json()["run_id"]
        body = wait_status(c, parent, {"paused_waiting_human"})
        child = body["run"]["subbot_children"]["kid"]
        assert body["subbot_children"][0]["run"] == child  # the API's tree (iterion/store/subbot_tree.py)
        yield server, parent, child
    finally:
        server.stop()


def _page(browser: Any, server: Server, width: int = 1280) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{server.url}/?token={server.token}")
    return page


def test_parent_and_child_pages_link_each_other(family: tuple[Server, str, str], browser: Any) -> None:
    server, parent, child = family
    page = _page(browser, server)
    page.goto(f"{server.url}/runs/{parent}")
    item = page.locator(f"#subbot-children li[data-child='{child}']")
    assert item.get_attribute("data-node") == "kid"
    text = item.inner_text()
    child_doc = server.run_json(child)
    assert child[:12] in text and child_doc["name"] in text and "paused_waiting_human" in text
    assert item.locator("a").get_attribute("href") == f"/runs/{child}"
    # the graph marks the subbot node and links it to the child run
    node = page.locator("#graph g.gnode.subbot[data-node='kid']")
    assert node.get_attribute("data-child") == child
    assert page.locator("#graph a.child-link").get_attribute("href") == f"/runs/{child}"
    assert page.locator("#graph g.gnode.subbot").count() == 1  # `after` is a compute node, not marked
    # the question is the child's, said so on the parent's page
    owner = page.locator("#question-owner").inner_text()
    assert child in owner and "gate" in owner and "kid" in owner
    assert "Approve write docs?" in page.locator("#question .asks").inner_text()
    assert page.locator("#parent-run").count() == 0  # the parent has no parent

    # by keyboard: the child's link in the graph takes focus and opens the child's page
    page.locator("#graph a.child-link").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/runs/{child}")
    link = page.locator("#parent-run a")
    assert link.get_attribute("href") == f"/runs/{parent}"
    assert "kid" in page.locator("#parent-run").inner_text()
    # the child's own question box sends the person to the parent's page
    note = page.locator("#question-parent")
    assert note.locator("a").get_attribute("href") == f"/runs/{parent}" and "answer it on the parent" in note.inner_text()
    page.close()


def test_the_run_list_nests_the_child_under_its_parent(family: tuple[Server, str, str], browser: Any) -> None:
    server, parent, child = family
    page = _page(browser, server)
    ids = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.getAttribute('data-run'))")
    assert ids.index(child) == ids.index(parent) + 1  # right under it, not an unrelated top-level row
    row = page.locator(f"#runs tr[data-run='{child}']")
    assert row.get_attribute("class") == "child" and row.get_attribute("data-depth") == "1"
    assert "child of" in row.inner_text() and "kid" in row.inner_text()
    assert page.locator(f"#runs tr[data-run='{parent}']").get_attribute("data-depth") == "0"
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_tree_pages_are_readable(family: tuple[Server, str, str], browser: Any, tmp_path: Path, width: int) -> None:
    server, parent, child = family
    page = _page(browser, server, width)
    for name, url in (("runs", "/"), ("parent", f"/runs/{parent}"), ("child", f"/runs/{child}")):
        page.goto(server.url + url)
        page.wait_for_load_state("load")
        shot = page.screenshot(full_page=True)
        (tmp_path / f"{name}-{width}.png").write_bytes(shot)
        assert png_distinct_bytes(shot) > 40, f"the {name} page at {width}px looks blank"
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} overflows at {width}px"
    page.close()


def test_answering_through_the_parent_page_finishes_both(family: tuple[Server, str, str], browser: Any) -> None:
    server, parent, child = family
    page = _page(browser, server)
    page.goto(f"{server.url}/runs/{parent}")
    page.select_option("#answer-form select[name='ok']", "true")
    page.click("#answer-submit")
    page.wait_for_function("document.querySelector('#status') && "
                           "document.querySelector('#status').textContent.includes('finished')", timeout=90_000)
    assert server.run_json(parent)["status"] == "finished"
    assert server.run_json(child)["status"] == "finished"  # the same child continued, as the CLI does
    body = server.client().get(f"/api/runs/{parent}").json()
    assert body["checkpoint"]["outputs"]["after"] == {"seen": True, "task": "write docs"}
    assert body["subbot_children"] == [{"node": "kid", "run": child, "name": server.run_json(child)["name"],
                                        "status": "finished", "children": []}]
    page.reload()
    assert "finished" in page.locator(f"#subbot-children li[data-child='{child}']").inner_text()
    page.close()
