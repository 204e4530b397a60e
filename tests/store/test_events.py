"""events.jsonl: append/read, seq across processes, threads, torn last line tolerated and repaired."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest

from iterion.store import EventLog, RunDoc, Store, last_flush_time, read_events
from iterion.store import events as ev

from .helpers import spawn, wait_for


def test_append_and_read(store: Store, run: RunDoc) -> None:
    log = store.events(run.id)
    first = log.append(ev.RUN_STARTED, payload={"workflow": "tidy"})
    second = log.append(ev.NODE_STARTED, node="edit", iteration=0)
    assert (first.seq, second.seq) == (1, 2)
    got = store.read_events(run.id)
    assert [(e.seq, e.type, e.node) for e in got] == [(1, "run_started", None), (2, "node_started", "edit")]
    assert got[0].payload == {"workflow": "tidy"}
    assert store.read_events(run.id, after_seq=1)[0].seq == 2
    line = json.loads(store.paths(run.id).events_jsonl.read_text().splitlines()[0])
    assert set(line) >= {"seq", "time", "type", "node", "payload"}


def test_vocabulary_names_the_spec_events() -> None:
    for name in ("run_started", "node_started", "node_finished", "node_failed", "boundary_written",
                 "checkpoint_written", "run_paused", "run_resumed", "run_finished", "run_failed",
                 "run_cancelled", "artifact_published", "human_input_requested", "run_retry_scheduled",
                 "run_retry_skipped", "run_rewound", "run_workspace_reset", "run_workspace_bank_restored",
                 "run_workspace_checkpoint", "budget_exceeded", "warning"):
        assert name in ev.EVENT_TYPES


def test_no_events_yet(tmp_path: Path) -> None:
    assert read_events(tmp_path) == []
    assert last_flush_time(tmp_path) is None


def test_threads_share_one_sequence(store: Store, run: RunDoc) -> None:
    log = store.events(run.id)

    def work(n: int) -> None:
        for i in range(50):
            log.append(ev.NODE_FINISHED, node=f"n{n}", payload={"i": i})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e.seq for e in store.read_events(run.id)] == list(range(1, 401))


def test_seq_continues_across_processes(store: Store, run: RunDoc) -> None:
    store.events(run.id).append(ev.RUN_STARTED)
    proc = spawn("""
        import sys
        from pathlib import Path
        from iterion.store import EventLog
        log = EventLog(Path(sys.argv[1]))
        print(log.append("node_started", node="x").seq)
    """, str(store.run_dir(run.id)))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip() == "2"
    # our cached appender notices the file grew and continues after the other process
    assert store.events(run.id).append(ev.NODE_FINISHED).seq == 3


def test_torn_last_line_is_ignored_then_repaired(store: Store, run: RunDoc) -> None:
    log = store.events(run.id)
    log.append(ev.RUN_STARTED)
    log.append(ev.NODE_STARTED, node="a")
    path = store.paths(run.id).events_jsonl
    with path.open("ab") as f:  # what a writer killed mid-line leaves
        f.write(b'{"seq": 3, "time": "2026-01-01T00:00:00Z", "ty')
    assert [e.seq for e in read_events(store.run_dir(run.id))] == [1, 2]
    fresh = EventLog(store.run_dir(run.id))  # e.g. the resuming process
    assert fresh.append(ev.RUN_RESUMED).seq == 3
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(ln) for ln in lines[:-1])
    assert [e.type for e in read_events(store.run_dir(run.id))] == ["run_started", "node_started", "run_resumed"]


def test_corrupt_complete_line_is_moved_aside(store: Store, run: RunDoc, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 10 point 7: garbage never blocks a reader; it is moved aside byte for byte."""
    store.events(run.id).append(ev.RUN_STARTED)
    with store.paths(run.id).events_jsonl.open("ab") as f:
        f.write(b"not json\n")
    store.events(run.id).append(ev.RUN_FINISHED)
    assert [e.type for e in read_events(store.run_dir(run.id))] == ["run_started", "run_finished"]
    aside = list(store.run_dir(run.id).glob("events.jsonl.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"not json\n"
    assert capsys.readouterr().err.count("warning:") == 1


_APPENDER = """
import sys
from pathlib import Path
from iterion.store import EventLog
log = EventLog(Path(sys.argv[1]))
ready = Path(sys.argv[2])
big = "x" * 200_000
i = 0
while True:
    log.append("warning", payload={"i": i, "pad": big})
    i += 1
    if i == 5:
        ready.touch()
"""


def test_sigkilled_appender_leaves_a_readable_log(store: Store, run: RunDoc, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = spawn(_APPENDER, str(store.run_dir(run.id)), str(ready))
    wait_for(ready)
    time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    events = read_events(store.run_dir(run.id))
    assert len(events) >= 5
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    nxt = EventLog(store.run_dir(run.id)).append(ev.RUN_RESUMED)
    assert nxt.seq == len(events) + 1
    assert read_events(store.run_dir(run.id))[-1].type == "run_resumed"


def test_last_flush_time_tracks_the_latest_append(store: Store, run: RunDoc) -> None:
    store.events(run.id).append(ev.RUN_STARTED)
    t1 = store.last_flush_time(run.id)
    assert t1 is not None
    path = store.paths(run.id).events_jsonl
    import os
    os.utime(path, (t1 - 120, t1 - 120))  # as if the owner went quiet two minutes ago
    assert store.last_flush_time(run.id) == pytest.approx(t1 - 120)
    store.events(run.id).append(ev.NODE_STARTED)
    t2 = store.last_flush_time(run.id)
    assert t2 is not None and t2 > t1 - 120
