"""The run index on both backends (iterion/store/runindex.py; JetStream: the summaries bucket):
pages and filters equal a full scan of the documents, and a row behind its document (a writer
killed between the two writes) is repaired by the next listing."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from iterion.store import RunDoc, RunStatus, Store, new_id
from iterion.store.docstore import CorruptRun
from tests.natsserver import NatsServer
from tests.storeconf.conftest import Backends


def _scan(store: Store, status: set[str] | None, workflow: str | None) -> list[tuple[str, str]]:
    out = []
    for e in store.list_entries():
        st = e.status if isinstance(e, CorruptRun) else e.status.value
        wf = None if isinstance(e, CorruptRun) else e.workflow_name
        if (status is None or st in status) and (workflow is None or wf == workflow):
            out.append((e.id, st))
    return sorted(out, reverse=True)


def test_pages_and_filters_equal_a_full_scan(facade: Backends) -> None:
    store: Store = facade.open()
    rnd = random.Random(30)
    for i in range(17):
        doc = store.create_run(RunDoc(id=new_id(), name=f"r{i}", workflow_name=rnd.choice("ab"), workspace_dir="/w"))
        if rnd.random() < 0.6:
            store.update_run(doc.id, lambda d: d.set_status(RunStatus.RUNNING))
        if rnd.random() < 0.4:
            store.update_run(doc.id, lambda d: d.set_status(RunStatus.FAILED_RESUMABLE, failure_code="x"))
    other: Store = facade.open()  # another process (JetStream: another machine) reads the same runs
    for status in (None, {"running"}, {"queued", "failed_resumable"}):
        for workflow in (None, "a"):
            for limit in (1, 4, 100):
                got, after = [], None
                while True:
                    page = other.run_page(status=status, workflow=workflow, after=after, limit=limit)
                    got += [(r.id, r.status) for r in page.rows]
                    if page.next is None:
                        break
                    after = page.next
                assert got == _scan(store, status, workflow)
    assert other.resolve_run("r3") == store.resolve_run("r3")


def test_a_row_behind_its_document_is_repaired(facade: Backends) -> None:
    store: Store = facade.open()
    doc = store.create_run(RunDoc(id=new_id(), name="behind", workflow_name="a", workspace_dir="/w"))
    docs = store.docs
    if facade.jetstream:
        # the document written as save_run does, the summary write skipped (as a kill between them)
        async def skip(*_: object) -> None:
            return None

        real = docs._put_summary  # type: ignore[attr-defined]
        docs._put_summary = skip  # type: ignore[attr-defined]
        store.update_run(doc.id, lambda d: d.set_status(RunStatus.RUNNING))
        docs._put_summary = real  # type: ignore[attr-defined]
    else:
        real = docs.index.record  # type: ignore[attr-defined]
        docs.index.record = lambda row: None  # type: ignore[attr-defined]
        store.update_run(doc.id, lambda d: d.set_status(RunStatus.RUNNING))
        docs.index.record = real  # type: ignore[attr-defined]
    fresh: Store = facade.open()
    assert [(r.id, r.status) for r in fresh.run_page().rows] == [(doc.id, "running")]


_KILLED_WRITER = """
import json, sys
from tests.storeconf.child import open_spec
from iterion.store import RunDoc, RunStatus
store = open_spec(json.loads(sys.argv[1]))
if sys.argv[2] == "create":
    store.create_run(RunDoc(id=sys.argv[3], name="killed", workflow_name="a", workspace_dir="/w"))
else:
    store.update_run(sys.argv[3], lambda d: d.set_status(RunStatus.RUNNING))
"""


@pytest.mark.parametrize("step", ["create", "update"])
def test_a_sigkill_between_the_document_and_its_summary_loses_nothing(facade: Backends, step: str) -> None:
    """kill point ``run-index``: the document written, its row not (JetStream: its summary, with
    the pending marker published before the document). Another machine's listing shows the run
    with the document's status, and the repair is saved (a third listing needs no marker)."""
    import os
    import signal
    import subprocess
    import sys

    from tests.storeconf.conftest import REPO

    store: Store = facade.open()
    store.create_run(RunDoc(id=new_id(), name="before", workflow_name="a", workspace_dir="/w"))
    rid = new_id()
    if step == "update":
        store.create_run(RunDoc(id=rid, name="killed", workflow_name="a", workspace_dir="/w"))
    spec = facade.spec()
    if not facade.jetstream:
        spec["root"] = str(store.root)
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, json.dumps(spec), step, rid], cwd=REPO,
                          env={**os.environ, "ITERION_TEST_KILL_AT": "run-index:1"}, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    want = "queued" if step == "create" else "running"
    assert store.load_run(rid).status.value == want
    other: Store = facade.open()
    assert {r.id: r.status for r in other.run_page(limit=None).rows}[rid] == want
    assert other.resolve_run("killed") == rid
    assert sorted((r.id, r.status) for r in facade.open().run_page(limit=None).rows) == \
        sorted((e.id, e.status.value) for e in store.list_runs())
    if facade.jetstream:
        docs = store.docs
        info = docs._bridge.call(docs._bridge.js.stream_info(  # type: ignore[attr-defined]
            docs.pending_stream, subjects_filter=f"{docs.prefix}.summary-pending.*"))  # type: ignore[attr-defined]
        assert not info.state.subjects  # the marker went with the repair


@pytest.fixture
def jetstream(tmp_path: Path, nats_server: NatsServer) -> Iterator[Backends]:
    b = Backends("store-jetstream", tmp_path, nats_server)
    yield b
    b.close()


def test_jetstream_snapshot_plus_tail_equals_a_full_scan(jetstream: Backends, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SNAPSHOT_EVERY summaries a listing writes the snapshot object; later listings read it
    plus the summaries written after it (updates, a discarded run), and agree with the documents."""
    from iterion.store.jetstream import store as js_store

    backend = jetstream

    monkeypatch.setattr(js_store, "SNAPSHOT_EVERY", 5)
    store: Store = backend.open()
    rnd = random.Random(7)
    ids = [store.create_run(RunDoc(id=new_id(), name=f"s{i}", workflow_name="a", workspace_dir="/w")).id
           for i in range(12)]
    assert len(backend.open().index_rows()) == 12  # writes the snapshot
    docs = store.docs
    assert docs._bridge.call(docs._objects.get(js_store.SNAPSHOT)) is not None  # type: ignore[attr-defined]
    for rid in rnd.sample(ids, 7):
        store.update_run(rid, lambda d: d.set_status(RunStatus.RUNNING))
    store.discard_new_run(ids[0])
    ids += [store.create_run(RunDoc(id=new_id(), name=f"t{i}", workflow_name="b", workspace_dir="/w")).id
            for i in range(3)]
    want = sorted((e.id, e.status.value) for e in store.list_runs())
    starts: list[int] = []
    real = js_store.JetStreamStore._entries

    async def spy(self: object, bucket: str, **kw: object) -> object:
        if bucket == "summaries":
            starts.append(int(kw.get("start_seq") or 0))  # type: ignore[call-overload]
        return await real(self, bucket, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(js_store.JetStreamStore, "_entries", spy)
    for _ in range(2):  # the second listing reads the snapshot the first one rewrote
        assert sorted((r.id, r.status) for r in backend.open().run_page(limit=None).rows) == want
    assert starts and all(s > 0 for s in starts)  # only the summaries after the snapshot were read


def test_jetstream_a_document_written_without_summary_or_marker_is_seen(jetstream: Backends) -> None:
    """An iterion from before the index writes documents alone: their count or their revision
    (newer than every summary) makes the listing compare every summary with its document once.
    (The file store's equivalent: tests/store/test_runindex.py, runs made behind the index.)"""
    facade = jetstream
    store: Store = facade.open()
    a = store.create_run(RunDoc(id=new_id(), name="a", workflow_name="a", workspace_dir="/w"))
    store.create_run(RunDoc(id=new_id(), name="b", workflow_name="a", workspace_dir="/w"))
    docs = store.docs
    js = docs._bridge  # type: ignore[attr-defined]
    doc = store.load_run(a.id)
    doc.status = RunStatus.RUNNING
    entry = js.call(docs._runs.get(a.id))  # type: ignore[attr-defined]
    js.call(docs._runs.update(a.id, doc.model_dump_json().encode(), last=entry.revision))  # type: ignore[attr-defined]
    old = RunDoc(id=new_id(), name="old", workflow_name="a", workspace_dir="/w")
    assert {r.id: r.status for r in facade.open().run_page(limit=None).rows}[a.id] == "running"
    js.call(docs._runs.create(old.id, old.model_dump_json().encode()))  # type: ignore[attr-defined]
    assert {r.id: r.status for r in facade.open().run_page(limit=None).rows}[old.id] == "queued"
