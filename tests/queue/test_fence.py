"""The lease fence (``iterion.runner.fence``): every write method of every store protocol is
refused once the runner's lease really expired, and nothing is written; reads still work.

The protocols are enumerated, not listed: a write method added to a store later fails
``test_every_method_of_every_store_protocol_is_defined_by_its_fence`` until it is fenced (and its
call added to ``WRITES`` below), so no write is unfenced by default."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from iterion.queue.lease import Lease
from iterion.runner.fence import (
    FencedAppender,
    FencedArtifacts,
    FencedAttachments,
    FencedDocs,
    FencedInteractions,
    FencedStore,
    LeaseLostError,
)
from iterion.store import AnchorReason, Checkpoint, RunDoc, Store, new_id
from iterion.store.artifacts import ArtifactStore
from iterion.store.attachments import AttachmentStore
from iterion.store.docstore import EventAppender, RunDocumentStore
from iterion.store.interactions import InteractionStore
from iterion.store.jetstream.blobs import JetStreamArtifacts, JetStreamAttachments
from iterion.store.jetstream.kvcreate import kv_create
from iterion.store.jetstream.tokens import run_token
from tests.queue.conftest import Cluster, wait_for

FENCES: dict[type, type] = {Store: FencedStore, RunDocumentStore: FencedDocs, ArtifactStore: FencedArtifacts,
                            AttachmentStore: FencedAttachments, InteractionStore: FencedInteractions,
                            EventAppender: FencedAppender}


def public_methods(cls: type) -> set[str]:
    """Every public method and property ``cls`` has (inherited too); class/static methods build
    a new object and touch no run, so they are not part of the instance's protocol."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__ in ("builtins", "typing", "typing_extensions"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or isinstance(value, (classmethod, staticmethod)):
                continue
            if inspect.isfunction(value) or isinstance(value, property):
                names.add(name)
    return names


@dataclass
class Handles:
    """What a stale execution holds when its lease is lost: the fenced store and the sub-stores
    it took before (the engine keeps its event appender for the whole run)."""

    store: FencedStore
    run_id: str
    appender: EventAppender
    artifacts: ArtifactStore
    attachments: AttachmentStore
    interactions: InteractionStore
    pending: str  # an interaction with a pending question
    upload: Path
    mutated: list[str]

    def mutate(self, doc: RunDoc) -> None:
        self.mutated.append(doc.id)

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(restart_node="b", restart_iteration=0, anchor_reason=AnchorReason.FAILURE)

    def other(self) -> RunDoc:
        return RunDoc(id=new_id(), name="intruder", workflow_name="w")


# every write method of every protocol, called as a stale execution would
WRITES: dict[type, dict[str, Callable[[Handles], object]]] = {
    Store: {
        "create_run": lambda h: h.store.create_run(h.other()),
        "discard_new_run": lambda h: h.store.discard_new_run(h.run_id),
        "ensure_reserve": lambda h: h.store.ensure_reserve(h.run_id),
        "release_reserve": lambda h: h.store.release_reserve(h.run_id),
        "save_run": lambda h: h.store.save_run(h.store.load_run(h.run_id), h.store.load_run(h.run_id).version),
        "update_run": lambda h: h.store.update_run(h.run_id, h.mutate),
        "save_checkpoint": lambda h: h.store.save_checkpoint(h.run_id, h.checkpoint()),
        "append_event": lambda h: h.store.append_event(h.run_id, "intruder"),
        "lock": lambda h: h.store.lock(h.run_id),
    },
    RunDocumentStore: {
        "create_run": lambda h: h.store.docs.create_run(h.other()),
        "discard_run": lambda h: h.store.docs.discard_run(h.run_id),
        "save_run": lambda h: h.store.docs.save_run(h.store.load_run(h.run_id), h.store.load_run(h.run_id).version),
        "update_run": lambda h: h.store.docs.update_run(h.run_id, h.mutate),
        "save_checkpoint": lambda h: h.store.docs.save_checkpoint(h.run_id, h.checkpoint()),
        "append_event": lambda h: h.store.docs.append_event(h.run_id, "intruder"),
    },
    ArtifactStore: {"publish": lambda h: h.artifacts.publish("plan", {"v": "intruder"})},
    AttachmentStore: {"stage": lambda h: h.attachments.stage("spec", h.upload)},
    InteractionStore: {
        "ask": lambda h: h.interactions.ask("b", {"q": "intruder?"}),
        "answer": lambda h: h.interactions.answer(h.pending, {"q": "intruder"}),
    },
    EventAppender: {"append": lambda h: h.appender.append("intruder")},
}

# the sub-stores handed out, fenced too (called after the loss: a fresh handle is fenced as well)
SUBSTORES: list[Callable[[Handles], object]] = [
    lambda h: h.store.events(h.run_id).append("intruder"),
    lambda h: h.store.artifacts(h.run_id).publish("plan", 2),
    lambda h: h.store.attachments(h.run_id).stage("spec", h.upload),
    lambda h: h.store.interactions(h.run_id).ask("b", {"q": "?"}),
    lambda h: h.store.docs.events(h.run_id).append("intruder"),
    lambda h: h.store.docs.artifacts(h.run_id, h.store.run_dir(h.run_id)).publish("plan", 3),
    lambda h: h.store.docs.attachments(h.run_id, h.store.run_dir(h.run_id)).stage("spec", h.upload),
]


def test_every_method_of_every_store_protocol_is_defined_by_its_fence() -> None:
    for protocol, fence in FENCES.items():
        methods = public_methods(protocol)
        inherited = sorted(m for m in methods if m not in vars(fence))
        assert not inherited, f"{fence.__name__} inherits {inherited} from {protocol.__name__} unfenced: define them"
        reads = fence.READS | getattr(fence, "SUBSTORES", frozenset())  # type: ignore[attr-defined]
        assert reads <= methods, f"{fence.__name__}.READS names no method of {protocol.__name__}: {reads - methods}"
        writes = methods - reads
        unknown = sorted(writes - set(WRITES[protocol]))
        assert not unknown, (f"{protocol.__name__}.{unknown} is a new write method: fence it in "
                             "iterion/runner/fence.py and add its call to WRITES here (or name it in READS)")
        assert set(WRITES[protocol]) == writes, f"WRITES[{protocol.__name__}] names a method that is no write"
    # the JetStream sub-stores add no method of their own the fence would not know
    assert public_methods(JetStreamArtifacts) <= public_methods(ArtifactStore)
    assert public_methods(JetStreamAttachments) <= public_methods(AttachmentStore)


def _state(store: Store, run_id: str) -> dict[str, Any]:
    """Everything a write could change, read through the unfenced store."""
    cp = store.load_checkpoint(run_id)
    arts = store.artifacts(run_id)
    run_dir = store.run_dir(run_id)
    return {
        "runs": sorted(d.id for d in store.list_runs()),
        "doc": store.load_run(run_id).model_dump(mode="json"),
        "events": [e.model_dump(mode="json") for e in store.read_events(run_id)],
        "checkpoint": cp.model_dump(mode="json") if cp else None,
        "artifacts": {n: arts.versions(n) for n in arts.names()},
        "attachments": [a.model_dump(mode="json") for a in store.attachments(run_id).list()],
        "interactions": [i.model_dump(mode="json") for i in store.interactions(run_id).list()],
        "locked": store.is_locked(run_id),
        "files": sorted((str(p.relative_to(run_dir)), p.stat().st_size) for p in run_dir.rglob("*") if p.is_file()),
    }


@pytest.fixture(params=["files", "jetstream"])
def backend_store(request: pytest.FixtureRequest, cluster: Cluster, tmp_path: Path) -> Iterator[Store]:
    yield Store(tmp_path / "store") if request.param == "files" else cluster.store()


def test_every_write_is_refused_after_the_lease_expired_and_nothing_is_written(
        backend_store: Store, cluster: Cluster, tmp_path: Path) -> None:
    store = backend_store
    doc = store.create_run(RunDoc(id=new_id(), name="fenced", workflow_name="w"))
    run_id = doc.id
    store.ensure_reserve(run_id)
    store.save_checkpoint(run_id, Checkpoint(restart_node="a", restart_iteration=0,
                                             anchor_reason=AnchorReason.FAILURE))
    store.append_event(run_id, "run_started")
    store.artifacts(run_id).publish("plan", {"v": 1})
    upload = tmp_path / "spec.txt"
    upload.write_text("the spec\n")
    store.attachments(run_id).stage("spec", upload)
    pending = store.interactions(run_id).ask("b", {"q": "go?"}).id

    # the queue's lease bucket forgets an entry 1s after its last write; this runner renews every
    # 2s, so its lease REALLY expires, another runner takes it, and our next renewal is refused
    queue = cluster.queue(lease_ttl=1.0)
    lease = Lease(queue, run_id, "stale", ttl_s=6.0)
    lease.acquire()
    try:
        fenced = FencedStore(store, lease)
        h = Handles(fenced, run_id, fenced.events(run_id), fenced.artifacts(run_id), fenced.attachments(run_id),
                    fenced.interactions(run_id), pending, upload, [])
        h.appender.append("node_started", node="a")  # the fence lets writes through while the lease holds
        h.artifacts.publish("plan", {"v": 2})

        wait_for(lambda: queue.bridge.call(kv_create(queue.leases, run_token(run_id), b'{"runner": "thief"}')),
                 "the lease to expire and another runner to take it", timeout=30, interval=0.1)
        wait_for(lease.lost.is_set, "the stale runner to notice its lease is lost", timeout=30)

        before = _state(store, run_id)
        refused = []
        for protocol, calls in WRITES.items():
            for name, call in calls.items():
                with pytest.raises(LeaseLostError, match="lost its lease"):
                    call(h)
                refused.append(f"{protocol.__name__}.{name}")
        for call in SUBSTORES:
            with pytest.raises(LeaseLostError):
                call(h)
        assert len(refused) == sum(len(c) for c in WRITES.values())
        assert h.mutated == []  # update_run never even read-modified the document
        assert _state(store, run_id) == before  # nothing escaped the fence

        # reads pass through after the loss (the runner still reports what it saw)
        assert fenced.load_run(run_id).id == run_id and fenced.docs.load_run(run_id).id == run_id
        assert fenced.artifacts(run_id).latest("plan") is not None
        assert [a.name for a in fenced.attachments(run_id).list()] == ["spec"]
        assert fenced.interactions(run_id).load(pending).pending
        assert len(fenced.read_events(run_id)) == len(before["events"]) == 2
    finally:
        lease.release()
