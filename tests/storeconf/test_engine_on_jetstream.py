"""The engine through ``Store(root, docs=JetStreamStore(...))``: a run pauses at a human gate,
resumes, the answer is published as an artifact, and every document it wrote is in JetStream, not under root."""

from __future__ import annotations

from pathlib import Path

from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.resume import ResumeOptions, resume_run
from iterion.store import RunStatus, Store
from iterion.store.jetstream import JetStreamStore
from tests.conftest import write_bot
from tests.natsserver import NatsServer

GATE = """
schema approval:
  approved: bool
  note: string

tool prepare:
  command: "echo prepared"

human approve:
  output: approval
  publish: prep
  instructions: "Ship {{outputs.prepare.stdout}}?"

tool ship:
  command: "echo '{{outputs.approve.note}}' > shipped.txt && echo shipped"

workflow gate:
  entry: prepare
  prepare -> approve
  approve -> ship when approved
  approve -> done when not approved
  ship -> done
"""


def test_pause_and_resume_through_the_jetstream_backed_store(nats_server: NatsServer, tmp_path: Path,
                                                             ws: Path) -> None:
    bot = write_bot(tmp_path / "src", GATE)
    with JetStreamStore(nats_server.url, prefix="eng1", timeout_s=5) as docs:
        store = Store(tmp_path / "work", docs=docs)
        r = launch_run(store, bot, LaunchOptions(workspace=ws, watch=False))
        assert r.status is RunStatus.PAUSED_WAITING_HUMAN, r.error
        run_dir = store.run_dir(r.run_id)
        # the documents are in JetStream; only this machine's pieces are under root
        assert not (run_dir / "run.json").exists() and not (run_dir / "events.jsonl").exists()
        assert not (run_dir / "checkpoint.json").exists() and not (run_dir / "artifacts").exists()

    # another process (another client) sees the paused run and resumes it
    with JetStreamStore(nats_server.url, prefix="eng1", timeout_s=5) as docs2:
        store2 = Store(tmp_path / "work", docs=docs2)
        doc = store2.load_run(r.run_id)
        assert doc.status is RunStatus.PAUSED_WAITING_HUMAN
        cp = store2.load_checkpoint(r.run_id)
        assert cp is not None and cp.restart_node == "approve"
        r2 = resume_run(store2, r.run_id, ResumeOptions(watch=False, answers={"approved": "true", "note": "go"}))
        assert r2.status is RunStatus.FINISHED, r2.error
        assert (ws / "shipped.txt").read_text() == "go\n"
        # the human node's published answer is an artifact in the object store, not under root
        assert store2.artifacts(r.run_id).latest("prep") is not None
        assert not (store2.run_dir(r.run_id) / "artifacts").exists()
        types = [e.type for e in store2.read_events(r.run_id)]
        assert types[0] == "run_started" and "run_paused" in types and types[-1] == "run_finished"
        assert [e.seq for e in store2.read_events(r.run_id)] == list(range(1, len(types) + 1))
        assert store2.load_run(r.run_id).status is RunStatus.FINISHED
        assert store2.last_flush_time(r.run_id) is not None
