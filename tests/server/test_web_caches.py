"""The pages' caches (iterion/server/pagecache.py) are hit when nothing changed and dropped on an
edit: a live refresh of a parked run compiles nothing and plans no ``rewind --auto`` dry run;
the index page walks the project once per TTL and recompiles only an edited file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.server.service import Service
from iterion.store import RunStatus, Store
from tests.conftest import FIXTURES


def _count(svc: Service, monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    calls: list[Any] = []
    real = getattr(svc, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(svc, name, counted)
    return calls


def test_a_refresh_with_nothing_changed_compiles_and_plans_nothing(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(FIXTURES / "demo", ws / "demo")
    monkeypatch.chdir(ws)
    store = Store.open(None, ws)
    run = launch_run(store, ws / "demo" / "demo.bot", LaunchOptions(workspace=ws, watch=False))
    assert run.status is RunStatus.PAUSED_WAITING_HUMAN, run.error
    svc = Service(store, ws)
    plans = _count(svc, monkeypatch, "rewind")
    src = ws / "demo" / "demo.bot"
    src.write_text(src.read_text().replace("Review this draft about", "Review, strictly, this draft about"))

    first = svc.run_view(run.run_id)
    assert first["source_change"]["pivot"] == "review" and first["graph_svg"]
    assert (svc.sources.compiles, len(plans)) == (1, 1)
    for _ in range(3):  # the live refreshes of a parked run
        again = svc.run_view(run.run_id)
    assert (svc.sources.compiles, len(plans)) == (1, 1)  # the cache was hit: no compile, no dry run
    assert again["source_change"] == first["source_change"] and again["graph_svg"] == first["graph_svg"]

    # an edit of the source: compiled and planned again, and the page says what changed now
    src.write_text(src.read_text().replace("Review, strictly, this draft about", "Review this draft about"))
    assert svc.run_view(run.run_id)["source_change"] is None  # back to what the run recorded
    assert svc.sources.compiles == 2
    src.write_text(src.read_text().replace("Publish it to", "Publish it, really, to"))
    changed = svc.run_view(run.run_id)["source_change"]
    assert (svc.sources.compiles, len(plans)) == (3, 2) and changed["pivot"] == "approve"

    # a new run version (the run moved: cancelled) plans again with the same source, compiles nothing
    svc.cancel(run.run_id, {"wait": 0})
    assert svc.run_view(run.run_id)["run"]["status"] == "cancelled"
    assert (svc.sources.compiles, len(plans)) == (3, 3)


def test_the_index_walk_is_cached_and_an_edit_recompiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "flows").mkdir(parents=True)
    for name in ("a", "b"):
        (project / "flows" / f"{name}.bot").write_text(
            f"vars:\n  topic: string = \"{name}\"\ncompute c:\n  expr:\n    x: \"vars.topic\"\n"
            f"workflow {name}:\n  entry: c\n  c -> done\n")
    svc = Service(Store(tmp_path / "store"), project)
    walks = _count(svc, monkeypatch, "_walk_bots")
    listed = svc.launchable()
    assert [w["file"] for w in listed] == ["flows/a.bot", "flows/b.bot"]
    assert (len(walks), svc.sources.compiles) == (1, 2)
    assert svc.launchable() == listed
    assert (len(walks), svc.sources.compiles) == (1, 2)  # no walk, no compile

    # an edit shows at once (its file's stat changed): only that file is compiled again
    a = project / "flows" / "a.bot"
    a.write_text(a.read_text().replace('= "a"', '= "edited"').replace("topic", "subject"))
    names = {w["file"]: [v["name"] for v in w["vars"]] for w in svc.launchable()}
    assert names == {"flows/a.bot": ["subject"], "flows/b.bot": ["topic"]}
    assert (len(walks), svc.sources.compiles) == (1, 3)

    # a new file shows once the walk's TTL has passed (the TTL set to 0 here rather than waited for)
    (project / "flows" / "c.bot").write_text((project / "flows" / "b.bot").read_text().replace("workflow b", "workflow c"))
    assert len(svc.launchable()) == 2
    svc._launchable_files.ttl = 0
    assert [w["file"] for w in svc.launchable()] == ["flows/a.bot", "flows/b.bot", "flows/c.bot"]
    assert (len(walks), svc.sources.compiles) == (2, 4)
    # a file that does not compile is listed with its problem, and not recompiled at every load
    (project / "flows" / "b.bot").write_text("workflow b:\n  entry: nowhere\n")
    svc._launchable_files.ttl = 3600
    problem = [w for w in svc.launchable() if w["file"] == "flows/b.bot"][0]["problem"]
    assert problem and svc.sources.compiles == 5
    svc.launchable()
    assert svc.sources.compiles == 5
