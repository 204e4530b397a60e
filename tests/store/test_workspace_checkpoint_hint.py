"""The recovery hint is the newest SUCCESSFUL push on the timeline; failures never erase it."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.store.events import (
    RUN_WORKSPACE_CHECKPOINT,
    RUN_WORKSPACE_CHECKPOINT_FAILED,
    EventLog,
    read_events,
)
from iterion.workspace_checkpoint import hint_from_events


def test_no_push_no_hint(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append("run_started")
    assert hint_from_events(read_events(tmp_path)) is None


def test_latest_success_survives_a_later_failure(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append(RUN_WORKSPACE_CHECKPOINT, payload={"ref": "refs/iterion/runs/r/checkpoints/1", "commit": "a" * 40,
                                                  "remote": "origin"})
    log.append(RUN_WORKSPACE_CHECKPOINT, payload={"ref": "refs/iterion/runs/r/checkpoints/2", "commit": "b" * 40,
                                                  "remote": "origin"})
    log.append(RUN_WORKSPACE_CHECKPOINT_FAILED, payload={"ref": "refs/iterion/runs/r/checkpoints/3",
                                                         "remote": "origin", "error": "denied"})
    hint = hint_from_events(read_events(tmp_path))
    assert hint is not None
    assert hint["ref"] == "refs/iterion/runs/r/checkpoints/2" and hint["commit"] == "b" * 40
    assert hint["seq"] == 2 and hint["source"] == "run_workspace_checkpoint"
    assert hint["fetch_command"] == "git fetch origin refs/iterion/runs/r/checkpoints/2"
    assert hint["time"].endswith("Z")


def test_unreadable_timeline_is_an_error(tmp_path: Path) -> None:
    from iterion.store.store import Store
    store = Store(tmp_path / "store")
    ev = store.run_dir("r1")
    ev.mkdir(parents=True)
    (ev / "events.jsonl").mkdir()  # a directory where the file should be: reading it fails
    from iterion.workspace_checkpoint import recovery_hint
    with pytest.raises(OSError):
        recovery_hint(store, "r1")
