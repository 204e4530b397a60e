"""The golden files, read by the code that reads them in production, from a store laid out on disk.

``test_golden.py`` proves each model accepts its golden documents; this proves the readers do:
the store's one-line-error wrappers, the event reader's repair pass (a golden timeline must
need none), the tracker's wire form for names that are not UTF-8 and its delta manifests, the
control and intent readers that swallow or translate errors. Formats whose production reader
is a bare ``read_model`` (the gitrefs records, the private index state) are covered there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from iterion.engine.control import read_request
from iterion.rewind.intent import load_intent
from iterion.store import Store
from tests.golden.registry import GOLDEN
from workspacetrack.objects import digest_of
from workspacetrack.store import TrackStore


def golden(name: str, file: str = "v1.json") -> bytes:
    return (GOLDEN / name / file).read_bytes()


def doc(name: str, file: str = "v1.json") -> dict[str, Any]:
    return json.loads(golden(name, file))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def place(store: Store, run_id: str, rel: str, data: bytes) -> None:
    path = store.run_dir(run_id) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_the_run_store_reads_its_goldens(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = doc("run")["id"]
    place(store, run_id, "run.json", golden("run"))
    place(store, run_id, "checkpoint.json", golden("checkpoint"))
    place(store, run_id, "events.jsonl", golden("event_line", "v1.jsonl"))

    run = store.load_run(run_id)
    assert run.status.value == doc("run")["status"] and run.version == doc("run")["version"]
    cp = store.load_checkpoint(run_id)
    assert cp is not None and cp.restart_node == doc("checkpoint")["restart_node"]
    assert cp.pending_interaction is not None  # the golden is a run parked at its gate
    events = store.read_events(run_id)
    assert len(events) == len(golden("event_line", "v1.jsonl").splitlines())
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert "warning" not in capsys.readouterr().err  # nothing was moved aside
    assert not list(store.run_dir(run_id).glob("events.jsonl.corrupt-*"))


def test_the_per_run_documents_read_through_their_stores(store: Store) -> None:
    run_id = doc("run")["id"]
    art, inter, att = doc("artifact"), doc("interaction"), doc("attachment")
    place(store, run_id, f"artifacts/{art['name']}/{art['version']}.json", golden("artifact"))
    place(store, run_id, f"interactions/{inter['id']}.json", golden("interaction"))
    place(store, run_id, f"attachments/{att['name']}.json", golden("attachment"))
    place(store, run_id, "control.json", golden("control_request"))

    assert store.artifacts(run_id).read(art["name"], art["version"]).value == art["value"]
    assert store.interactions(run_id).load(inter["id"]).pending  # parked at the gate: unanswered
    record = store.attachments(run_id).get(att["name"])
    assert record is not None and record.sha256 == att["sha256"]
    request = read_request(store, run_id)  # swallows errors: None would mean unreadable
    assert request is not None and request.action.value == doc("control_request")["action"]


@pytest.mark.parametrize("variant", ["v1.json", "v1-worktree.json"])
def test_an_interrupted_rewind_is_readable(store: Store, variant: str) -> None:
    intent_doc = doc("rewind_intent", variant)
    place(store, intent_doc["run_id"], "rewind-intent.json", golden("rewind_intent", variant))
    intent = load_intent(store, intent_doc["run_id"])
    assert intent is not None and intent.files is not None
    assert intent.planned_operations() > 0
    assert (intent.files.tracked is not None) == (intent.mechanism == "workspacetrack")


def test_the_tracker_reads_its_state_manifests_and_cache(tmp_path: Path) -> None:
    state = doc("track_state")
    track = TrackStore(tmp_path / "track", state["run_id"])
    track.run_dir.mkdir(parents=True)
    (track.run_dir / "state.json").write_bytes(golden("track_state"))
    loaded = track.load_state()
    assert loaded is not None and loaded.head == state["head"] and len(loaded.chain) == len(state["chain"])

    digests = {}
    for file in ("v1.json", "v1-delta.json", "v1-nonutf8.json"):
        data = golden("track_manifest", file)
        digests[file] = digest_of(data)
        track.objects.put(data, digests[file])  # the production writer: whatever its layout
    delta = json.loads(golden("track_manifest", "v1-delta.json"))
    assert delta["base"] == digests["v1.json"], "the delta golden must be based on the full one"
    full = track.read_manifest(digests["v1-delta.json"])  # the delta applied onto its base
    assert set(full.entries) >= set(delta["entries"])
    names = {os.fsencode(p) for p in track.read_manifest(digests["v1-nonutf8.json"]).entries}
    assert b"d\xe9/caf\xe9.txt" in names  # the wire form decoded back to the exact bytes

    for file in ("v1.json", "v1-nonutf8.json"):
        (track.run_dir / "statcache.json").write_bytes(golden("track_statcache", file))
        cache = track.load_cache()  # a cache: unreadable would come back empty, not raise
        assert cache.rows and cache.manifest == doc("track_statcache", file)["manifest"]
