"""What the engine cannot record reaches the person through the run's listener, never a print.

(iterion/engine/notice.py; issue 18 point 3.) In process, against a real store on disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.progress import Progress, notices_only
from iterion.engine.auto_resume import auto_resume
from iterion.engine.execution import make_emit
from iterion.engine.notice import is_unrecorded, notify, unrecorded_warning
from iterion.engine.result import RunResult
from iterion.store import Event, RunDoc, RunStatus, Store
from iterion.store import events as ev
from iterion.store.ids import new_id


def _run(store: Store) -> str:
    rid = new_id()
    store.create_run(RunDoc(id=rid, name="n", workflow_name="w", status=RunStatus.FAILED_RESUMABLE))
    return rid


def test_a_lost_event_is_told_to_the_listener_once_and_never_printed(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    store = Store(tmp_path / "store")
    rid = _run(store)
    events = store.paths(rid).events_jsonl
    events.unlink(missing_ok=True)
    events.mkdir()  # appending now fails with an OSError, as on a full disk
    heard: list[Event] = []
    emit = make_emit(store, rid, heard.append)
    emit(ev.NODE_STARTED, "a", 0, {})
    emit(ev.NODE_FINISHED, "a", 0, {})
    assert len(heard) == 1 and is_unrecorded(heard[0])
    assert heard[0].payload["message"].startswith("could not append event node_started")
    out, err = capfd.readouterr()
    assert out == err == ""  # the engine itself wrote nothing to the terminal


def test_auto_resume_tells_its_decision_to_the_listener(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    store = Store(tmp_path / "store")
    rid = _run(store)
    heard: list[Event] = []
    failed = RunResult(run_id=rid, name="n", status=RunStatus.FAILED_RESUMABLE, failure_code="MY_BOT_CODE")
    assert auto_resume(store, failed, 3, resume=lambda: failed, listener=heard.append) is failed
    assert [e.payload["message"] for e in heard] == [f"run {rid}: not auto-recoverable (code MY_BOT_CODE)"]
    assert capfd.readouterr().err == ""


def test_the_clis_listeners_print_unrecorded_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    recorded = Event(seq=7, time=unrecorded_warning("x").time, type=ev.WARNING, payload={"message": "on the timeline"})
    notices_only(recorded)  # --json: a recorded warning stays on the timeline only
    notices_only(unrecorded_warning("the disk is full"))
    assert capsys.readouterr().err == "warning: the disk is full\n"
    Progress(live=False)(unrecorded_warning("the disk is full"))
    assert capsys.readouterr().err == "warning: the disk is full\n"


def test_a_failing_listener_never_stops_the_caller() -> None:
    def broken(_e: Event) -> None:
        raise RuntimeError("display bug")

    notify(broken, "still fine")
    notify(None, "nobody listens")
