"""Ctrl-C twice in `iterion dev` (issue 34 point 1): the second Ctrl-C interrupts the engine
before it records the cancel; dev then moves the run out of `running` itself.

Through a pty the first Ctrl-C usually completes the cancel before the second arrives
(tests/dev/test_dev_edges.py), so the abrupt case is made here for certain: a run whose process
died while `running` (SIGKILL: its lock is free), and a session whose execution is interrupted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cli.dev import Session
from cli.preflight import open_store
from iterion.store import RunStatus
from tests.conftest import kill_process, make_checkout, start_cli
from tests.dev.test_dev_edges import FLOW


def test_an_interrupted_execution_never_leaves_the_run_running(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    src = tmp_path / "src"
    src.mkdir()
    bot = src / "wf.bot"
    bot.write_text(FLOW.format(topic="x"))
    (src / "wf.script.yaml").write_text('write:\n  "*": {echo: true, sleep_s: 60}\n')
    store_dir = tmp_path / "store"
    proc = start_cli("run", str(bot), "--no-input", cwd=ws, store=store_dir, start_new_session=True)
    deadline = time.monotonic() + 60
    run_id = None
    while run_id is None:  # the run exists and executes `write`
        assert time.monotonic() < deadline and proc.poll() is None
        runs = store_dir / "runs"
        for d in runs.iterdir() if runs.is_dir() else []:
            events = d / "events.jsonl"
            if events.is_file() and '"node_started"' in events.read_text():
                run_id = d.name
        time.sleep(0.05)
    kill_process(proc)  # the process is gone, its document still says `running`
    proc.wait()
    store = open_store(store_dir, write=True)
    assert store.load_run(run_id).status is RunStatus.RUNNING
    session = Session(store, bot, run_id, confirm=False, debounce_s=0.1)
    session.watch.read_stdin = False

    def interrupted() -> object:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.execute(interrupted)  # type: ignore[arg-type]
    doc = store.load_run(run_id)
    assert doc.status is RunStatus.CANCELLED
    lines = (store_dir / "runs" / run_id / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["type"] for x in lines][-1] == "run_cancelled"
