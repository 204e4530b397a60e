"""Run document: launch fields, CAS refusal of a stale writer (in-process and across processes),
and atomicity of the write under SIGKILL."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from iterion.budget import BudgetAsk
from iterion.store import (
    InvalidTransitionError,
    RunDoc,
    RunExistsError,
    RunNotFoundError,
    RunStatus,
    StaleWriteError,
    Store,
    WorktreeInfo,
    new_id,
)
from iterion.store.reserve import RESERVE_FILE
from iterion.store.run_doc import set_sources
from gitrefs.persist.atomic import is_temp_leftover

from .helpers import spawn, wait_for


def test_create_and_load_round_trip(store: Store, run: RunDoc) -> None:
    loaded = store.load_run(run.id)
    assert loaded.version == 1
    assert loaded.status is RunStatus.QUEUED
    assert loaded.name.startswith("tidy-")
    assert loaded.workflow_digest == "sha256:abc"
    assert loaded.format_version == RunDoc.FORMAT_VERSION
    assert store.paths(run.id).run_json.is_file()


def test_create_refuses_existing_id(store: Store, run: RunDoc) -> None:
    with pytest.raises(RunExistsError):
        store.create_run(RunDoc(id=run.id, name="x", workflow_name="tidy"))


def test_unknown_run_is_a_clear_error(store: Store) -> None:
    with pytest.raises(RunNotFoundError, match="not found"):
        store.load_run(new_id())


def test_launch_fields_persist(store: Store) -> None:
    doc = RunDoc(id=new_id(), name="w-a-b", workflow_name="w", bundle_path="/b.botz", vars={"x": 1},
                 inputs={"y": "z"}, budget=BudgetAsk(max_cost_usd=2.5, max_duration="1h30m"),
                 workspace_mode="worktree",
                 worktree=WorktreeInfo(path="/wt", branch="iterion/run", base_commit="a" * 40),
                 subbot_children={"child": "r2"}, explicit_resume_required=True, last_resume_digest="d")
    store.create_run(doc)
    loaded = store.load_run(doc.id)
    assert loaded.budget.max_duration_s == 5400
    assert loaded.budget.max_cost_usd == 2.5
    assert loaded.worktree is not None and loaded.worktree.released is False
    assert loaded.workspace_mode.value == "worktree"
    assert loaded.subbot_children == {"child": "r2"}
    assert loaded.explicit_resume_required is True
    assert loaded.vars == {"x": 1} and loaded.inputs == {"y": "z"}


def test_sources_recorded_under_cap_and_flagged_over(store: Store, run: RunDoc) -> None:
    set_sources(run, "main.bot", {"main.bot": "workflow w:\n", "lib/x.bot": "agent a:\n"})
    assert run.workflow_source == "workflow w:\n"
    assert set(run.workflow_sources) == {"main.bot", "lib/x.bot"}
    assert run.workflow_sources_truncated is False
    set_sources(run, "main.bot", {"main.bot": "m", "big.bot": "x" * (1024 * 1024)})
    assert run.workflow_source == "m"
    assert run.workflow_sources == {}
    assert run.workflow_sources_truncated is True


def test_save_increments_version_and_refuses_stale(store: Store, run: RunDoc) -> None:
    a = store.load_run(run.id)
    b = store.load_run(run.id)
    a.set_status(RunStatus.RUNNING)
    store.save_run(a, 1)
    assert a.version == 2
    b.set_status(RunStatus.CANCELLED)
    with pytest.raises(StaleWriteError, match="expected version 1, found 2"):
        store.save_run(b, b.version)
    assert store.load_run(run.id).status is RunStatus.RUNNING


def test_update_run_reapplies_on_a_fresh_read(store: Store, run: RunDoc) -> None:
    doc = store.update_run(run.id, lambda d: d.set_status(RunStatus.RUNNING))
    assert doc.version == 2 and store.load_run(run.id).status is RunStatus.RUNNING


def test_set_status_refuses_a_transition_the_table_forbids(run: RunDoc) -> None:
    run.set_status(RunStatus.RUNNING)
    run.set_status(RunStatus.FINISHED)
    assert run.finished_at is not None
    with pytest.raises(InvalidTransitionError, match="cannot move from finished to running"):
        run.set_status(RunStatus.RUNNING)


_RACER = """
import sys, time
from pathlib import Path
from iterion.store import Store, StaleWriteError
root, run_id, go, me = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
store = Store(root)
doc = store.load_run(run_id)
expected = doc.version
doc.error = me
(go.parent / f"ready-{me}").touch()
while not go.exists():
    time.sleep(0.001)
try:
    store.save_run(doc, expected)
except StaleWriteError:
    print("stale")
    sys.exit(3)
print("won")
"""


def test_cas_two_processes_only_one_wins(store: Store, run: RunDoc, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [spawn(_RACER, str(store.root), run.id, str(go), f"p{i}") for i in range(4)]
    for i in range(4):
        wait_for(tmp_path / f"ready-p{i}")
    go.touch()
    results = [p.communicate(timeout=60) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 3, 3, 3], results
    winner = f"p{codes.index(0)}"
    final = store.load_run(run.id)
    assert final.version == 2
    assert final.error == winner


_WRITER = """
import sys
from pathlib import Path
from iterion.store import Store
root, run_id, ready = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
store = Store(root)
i = 0
while True:
    doc = store.load_run(run_id)
    doc.workflow_source = str(i % 10) * 4_000_000  # a big document: the kill lands mid-write
    doc.error = f"gen-{i}"
    store.save_run(doc, doc.version)
    i += 1
    if i == 2:
        ready.touch()
"""


def test_sigkilled_writer_leaves_a_complete_document(store: Store, run: RunDoc, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = spawn(_WRITER, str(store.root), run.id, str(ready))
    wait_for(ready)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    doc = store.load_run(run.id)  # parses: never a torn document
    assert doc.error is not None and doc.error.startswith("gen-")
    assert doc.workflow_source is not None and len(doc.workflow_source) == 4_000_000
    assert doc.version >= 3
    # whatever the killed writer left is a recognisable temp file, never run.json itself
    raw = json.loads(store.paths(run.id).run_json.read_text())
    assert raw["version"] == doc.version
    for leftover in store.run_dir(run.id).iterdir():
        assert leftover.name in {"run.json", ".run.json.cas", RESERVE_FILE} or is_temp_leftover(leftover), leftover
    # and the next writer is not blocked by the dead one's CAS lock
    doc.error = "after"
    store.save_run(doc, doc.version)
    assert store.load_run(run.id).error == "after"
