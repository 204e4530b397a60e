"""The HTTP API's run detail carries the subbot tree (what the web page draws)."""

from __future__ import annotations

from pathlib import Path

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.server.service import Service
from iterion.store import RunStatus, Store


def test_the_run_detail_lists_the_children_and_the_child_its_parent(project: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    parked = launch_run(store, project / "parent.bot", LaunchOptions(workspace=project, watch=False))
    assert parked.status is RunStatus.PAUSED_WAITING_HUMAN
    svc = Service(store, project)
    detail = svc.get_run(parked.run_id)
    [child] = detail["subbot_children"]
    assert (child["node"], child["status"]) == ("kid", "paused_waiting_human")
    assert detail["run"]["subbot_children"] == {"kid": child["run"]}
    child_run = svc.get_run(child["run"])["run"]
    assert (child_run["parent_run"], child_run["parent_node"]) == (parked.run_id, "kid")
    # in-process too: answering the parent finishes the child it reattaches
    done = resume_run(store, parked.run_id, ResumeOptions(answers={"ok": "true"}, watch=False))
    assert done.status is RunStatus.FINISHED
    assert svc.get_run(parked.run_id)["subbot_children"][0]["status"] == "finished"
