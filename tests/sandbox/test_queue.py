"""A queued launch of a sandboxed workflow on a runner host without bubblewrap: the queued run ends
`failed` with SANDBOX_SETUP_FAILED (its own code, not IR_UNLOADABLE) and the delivery is acked,
not re-offered; nothing executed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from iterion.queue.publish import queue_launch
from iterion.runner.loop import Runner, RunnerConfig
from iterion.store import RunStatus
from tests.queue.conftest import Cluster, cluster, make_forge, nats_server, wait_for  # noqa: F401

from .test_cli_refusals import no_bwrap_path

BOXED = """\
tool work:
  command: "echo ran > ran.txt"

workflow boxed:
  sandbox: auto
  entry: work
  work -> done
"""


def test_a_runner_without_bwrap_fails_the_queued_run_with_the_sandbox_code(cluster: Cluster, tmp_path: Path,  # noqa: F811
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", no_bwrap_path(tmp_path))
    monkeypatch.setenv("ITERION_RETRY_BACKOFF_S", "0")
    forge = make_forge(tmp_path / "forge", {"boxed.bot": BOXED})
    store, queue = cluster.store(), cluster.queue(max_deliver=3)
    lines: list[str] = []
    runner = Runner(cluster.store(), cluster.queue(max_deliver=3),
                    RunnerConfig(work_dir=tmp_path / "work", name="nobwrap", grace_s=2), say=lines.append)
    thread = threading.Thread(target=runner.serve, daemon=True)
    thread.start()
    try:
        doc, _ = queue_launch(store, queue, request_id="boxed-0", file="boxed.bot", repo_url=str(forge), ref="main")
        wait_for(lambda: [ln for ln in lines if doc.id in ln and not ln.startswith("claim")] or None,
                 f"the disposition of {doc.id}: {lines}", timeout=90)
        got = store.load_run(doc.id)
        assert (got.status, got.failure_code) == (RunStatus.FAILED, "SANDBOX_SETUP_FAILED"), got.error
        assert "bubblewrap" in (got.error or "")
        dropped = [e for e in store.read_events(doc.id) if e.type == "run_delivery_dropped"]
        assert dropped and "apt-get install bubblewrap" in (dropped[0].payload.get("hint") or "")
        assert not list((tmp_path / "work").rglob("ran.txt"))
    finally:
        runner.stop()
        thread.join(30)
