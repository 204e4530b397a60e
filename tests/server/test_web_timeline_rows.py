"""The web timeline's rows (iterion/server/timeline.py) over a real run of the demo: a gate
answered after a pause is one row, not two; finished rows carry their output; a rewind marks the
executions it dropped and its undo unmarks them."""

from __future__ import annotations

import shutil
from pathlib import Path

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.rewind.rewind import RewindRequest, rewind_run
from iterion.rewind.undo import undo_rewind
from iterion.server import timeline as tl
from iterion.server.service import Service
from iterion.server.web import live_section
from iterion.store import RunStatus, Store
from tests.conftest import FIXTURES


def test_rows_once_with_outputs_and_rewound_marks(ws: Path, monkeypatch: object) -> None:
    shutil.copytree(FIXTURES / "demo", ws / "demo")
    monkeypatch.chdir(ws)  # type: ignore[attr-defined]
    store = Store.open(None, ws)
    run = launch_run(store, ws / "demo" / "demo.bot", LaunchOptions(workspace=ws, watch=False))
    assert run.status is RunStatus.PAUSED_WAITING_HUMAN, run.error
    rewind_run(store, RewindRequest(run_id=run.run_id, node="collect"))
    rows = tl.executions(store.read_events(run.run_id))
    marked = {r["node"] for r in rows if r.get("rewound")}
    assert marked == {"collect", "approve"}
    detail = Service(store, ws).run_view(run.run_id)  # the page's view: each row's rewind offer
    assert [r["node"] for r in detail["executions"]] == [r["node"] for r in rows]
    page = live_section(detail)
    assert page.count("s-rewound") == 2 and "<summary>output</summary>" in page
    assert "class=preview data-node='collect'" not in page  # no rewind offered on a dropped execution
    assert "class=preview data-node='stamp'" in page and "(goes to checks)" in page  # its fan-out's router

    undo_rewind(store, run.run_id)
    rows = tl.executions(store.read_events(run.run_id))
    assert not any(r.get("rewound") for r in rows)

    resumed = resume_run(store, run.run_id, ResumeOptions(answers={"approved": True, "note": "ok"}))
    assert resumed.status is RunStatus.FINISHED, resumed.error
    rows = tl.executions(store.read_events(run.run_id))
    keys = [(r["node"], r["iteration"]) for r in rows]
    assert len(keys) == len(set(keys)), keys  # the answered gate is one row
    approve = next(r for r in rows if r["node"] == "approve")
    assert approve["status"] == "finished" and approve["output"]["note"] == "ok"
    assert next(r for r in rows if r["node"] == "plan")["output"]["title"] == "Notes on rivers"
