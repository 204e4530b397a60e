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


def _place_state(track: TrackStore, state_file: str, log: bytes | None) -> None:
    (track.run_dir / "state.json").write_bytes(golden("track_state", state_file))
    (track.run_dir / "state.log").unlink(missing_ok=True)
    if log is not None:
        (track.run_dir / "state.log").write_bytes(log)


def test_the_tracker_reads_its_state_of_every_version(tmp_path: Path) -> None:
    """Version 1: state.json alone. Version 2: state.json plus the state.log lines appended after
    it, folded together by the tracker's own reader (``TrackStore.load_state``)."""
    v1 = doc("track_state")
    track = TrackStore(tmp_path / "v1" / "track", v1["run_id"])
    track.run_dir.mkdir(parents=True)
    _place_state(track, "v1.json", None)
    loaded = track.load_state()
    assert loaded is not None and loaded.head == v1["head"] and len(loaded.chain) == len(v1["chain"])
    assert set(loaded.snapshots) == set(v1["snapshots"]) and loaded.log_seq == 0

    v2 = doc("track_state", "v2.json")
    log = golden("track_state_log", "v1.jsonl")
    records = [json.loads(line) for line in log.splitlines() if line.strip()]
    assert records, "the state.log golden holds no record"
    track = TrackStore(tmp_path / "v2" / "track", v2["run_id"])
    track.run_dir.mkdir(parents=True)
    _place_state(track, "v2.json", log)
    loaded = track.load_state()
    heads = [r["head"] for r in records if r.get("head")]
    snaps = set(v2["snapshots"]) | {r["snapshot"]["id"] for r in records if r.get("snapshot")}
    assert loaded is not None and loaded.log_seq == records[-1]["seq"] > v2["log_seq"]
    assert loaded.head == (heads[-1] if heads else v2["head"])
    assert len(loaded.chain) == len(v2["chain"]) + sum(1 for r in records if r.get("link"))
    assert set(loaded.snapshots) == snaps
    assert loaded.banks == v2["banks"] + [r["bank"] for r in records if r.get("bank")]
    # the golden run's state is complete: every snapshot's manifest is the run's
    assert loaded.snapshots[loaded.head].run_id == v2["run_id"]


@pytest.mark.parametrize("version", [1, 2])
def test_the_tracker_reads_its_manifests(tmp_path: Path, version: int) -> None:
    track = TrackStore(tmp_path / "track", "r" + "0" * 31)
    digests = {}
    for kind in ("", "-delta", "-nonutf8"):
        data = golden("track_manifest", f"v{version}{kind}.json")
        digests[kind] = digest_of(data)
        track.objects.put(data, digests[kind])  # the production writer: whatever its layout
    delta = json.loads(golden("track_manifest", f"v{version}-delta.json"))
    assert delta["base"] == digests[""], "the delta golden must be based on the full one"
    full = track.read_manifest(digests["-delta"])  # the delta applied onto its base
    assert set(full.entries) >= set(delta["entries"])
    assert not set(full.entries) & set(delta["removed"])
    names = {os.fsencode(p) for p in track.read_manifest(digests["-nonutf8"]).entries}
    assert b"d\xe9/caf\xe9.txt" in names  # the wire form decoded back to the exact bytes


def test_the_tracker_reads_its_stat_cache(tmp_path: Path) -> None:
    """A cache: one of the current format is read; one of an older format (or unreadable) comes
    back empty, i.e. cold (its rows are re-hashed), never an error."""
    track = TrackStore(tmp_path / "track", doc("track_state")["run_id"])
    track.run_dir.mkdir(parents=True)
    for file in ("v2.json", "v2-nonutf8.json"):
        (track.run_dir / "statcache.json").write_bytes(golden("track_statcache", file))
        cache = track.load_cache()
        want = doc("track_statcache", file)
        assert cache.rows and cache.manifest == want["manifest"] and cache.size_cap == want["size_cap"]
        assert len(cache.rows) == len(want["rows"])
    # version 3: the rows git's index vouched for are left out; the header says which index
    (track.run_dir / "statcache.json").write_bytes(golden("track_statcache", "v3.json"))
    cache, want = track.load_cache(), doc("track_statcache", "v3.json")
    assert (cache.index, cache.total, cache.manifest) == (want["index"], want["total"], want["manifest"])
    assert set(cache.rows) == set(want["rows"]) and cache.total > len(cache.rows)
    for file in ("v1.json", "v1-nonutf8.json"):
        (track.run_dir / "statcache.json").write_bytes(golden("track_statcache", file))
        cache = track.load_cache()
        assert not cache.rows and cache.manifest is None  # version 1 rows hashed another way: cold


def test_the_stat_cache_keeps_the_kind_of_its_ids(tmp_path: Path) -> None:
    want = doc("track_statcache", "v2.json")
    assert want["ids"] == "git"  # the golden run's workspace is a git checkout
    track = TrackStore(tmp_path / "track", doc("track_state")["run_id"])
    track.run_dir.mkdir(parents=True)
    (track.run_dir / "statcache.json").write_bytes(golden("track_statcache", "v2.json"))
    assert track.load_cache().ids == want["ids"]


@pytest.mark.parametrize("variant", ["v1.json", "v1-worktree.json"])
def test_a_rewind_can_be_undone_from_its_golden_record(store: Store, variant: str) -> None:
    from iterion.rewind.undo import _load  # the reader ``rewind --undo`` uses

    want = doc("rewind_undo", variant)
    place(store, want["run_id"], "rewind-undo.json", golden("rewind_undo", variant))
    rec = _load(store, want["run_id"])
    assert rec.rewound_seq == want["rewound_seq"] and rec.mechanism == want["mechanism"]
    assert rec.bank == want["bank"] and rec.touched == want["touched"] and not rec.undoing
    assert rec.checkpoint["run_id"] == want["run_id"]  # the checkpoint before the rewind, as JSON
    assert (rec.revert_commit is not None) == (variant == "v1-worktree.json")


def test_a_parked_claw_conversation_is_rehydrated(tmp_path: Path) -> None:
    from iterion.backends.claw import conversation

    want = doc("claw_conversation")
    directory = tmp_path / "conversations"
    directory.mkdir()
    conversation.conversation_path(directory, want["session_id"]).write_bytes(golden("claw_conversation"))
    conv = conversation.load(directory, want["session_id"])
    assert conv is not None and conv.messages == want["messages"]
    # parked on ask_user: the pending call is the last assistant message's, the calls after it queued
    assert conv.pending is not None and conv.pending.kind == "ask_user"
    assert conv.pending.model_dump() == doc("claw_pending_call")
    last = next(m for m in reversed(conv.messages) if m["role"] == "assistant")
    ids = [c["id"] for c in last["tool_calls"]]
    assert conv.pending.id in ids and [c["id"] for c in conv.queued] == ids[ids.index(conv.pending.id) + 1:]


def test_the_export_reads_its_blob_cache(tmp_path: Path) -> None:
    import pygit2

    from workspacetrack.gitexport import _Blobs  # the reader: a damaged cache would come back empty

    repo = pygit2.init_repository(str(tmp_path / "repo"))
    path = tmp_path / "gitblobs.json"
    path.write_bytes(golden("track_blob_cache"))
    blobs = _Blobs(repo, path, None)
    assert blobs.cache.blobs and blobs.cache.blobs == doc("track_blob_cache")["blobs"]
