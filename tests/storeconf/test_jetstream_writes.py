"""A JetStream document write's summary path (iterion/store/jetstream/store.py, "the run index"):
the writer's own marker purge is not waited for, so it is bounded by the marker's sequence and
never removes a later write's marker; the summary is one revision-checked write when this
process wrote the last one, and concurrent writers (threads, other machines) still leave the
newest document's row. (The crash cases: tests/storeconf/test_run_index.py.)"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from iterion.store import RunDoc, RunStatus, new_id
from iterion.store.jetstream import JetStreamStore
from tests.natsserver import NatsServer


@pytest.fixture
def stores(nats_server: NatsServer) -> Iterator[list[JetStreamStore]]:
    prefix = "w" + uuid.uuid4().hex[:10]
    opened = [JetStreamStore(nats_server.url, prefix=prefix) for _ in range(2)]  # two machines
    yield opened
    for s in opened:
        s.close()


def _markers(store: JetStreamStore) -> dict[str, int]:
    info = store.bridge.call(store.bridge.js.stream_info(store.pending_stream,
                                                         subjects_filter=f"{store.prefix}.summary-pending.*"))
    return dict(info.state.subjects or {})


def _summary(store: JetStreamStore, run_id: str) -> Any:
    entry = store.bridge.call(store._summaries.get(run_id))
    return json.loads(entry.value)


def test_a_late_purge_never_removes_a_later_marker(stores: list[JetStreamStore]) -> None:
    store = stores[0]
    first = store.bridge.call(store._mark_pending("run1"))
    second = store.bridge.call(store._mark_pending("run1"))  # the next write of the run, marked
    store.bridge.call(store._unmark_pending("run1", first))  # the first write's purge, landing late
    assert _markers(store) == {f"{store.prefix}.summary-pending.run1": 1}
    store.bridge.call(store._unmark_pending("run1", second))
    assert _markers(store) == {}


def test_writes_leave_their_summary_and_no_marker(stores: list[JetStreamStore]) -> None:
    store, other = stores
    doc = store.create_run(RunDoc(id=new_id(), name="w", workflow_name="a", workspace_dir="/w"))
    for status in (RunStatus.RUNNING, RunStatus.PAUSED_OPERATOR, RunStatus.RUNNING, RunStatus.FINISHED):
        store.update_run(doc.id, lambda d, s=status: d.set_status(s))  # type: ignore[misc]
    store.close()  # waits for the purges in flight
    row = _summary(other, doc.id)
    assert (row[2], row[9]) == ("finished", 5) and _markers(other) == {}


def test_concurrent_writers_leave_the_newest_documents_row(stores: list[JetStreamStore]) -> None:
    """Threads of one process and a second machine update one run: the summary this process
    remembers goes stale under them, and the row left is still the newest document's."""
    a, b = stores
    rid = a.create_run(RunDoc(id=new_id(), name="c", workflow_name="a", workspace_dir="/w")).id
    b.load_run(rid)
    statuses = [RunStatus.RUNNING, RunStatus.PAUSED_OPERATOR]

    def writer(store: JetStreamStore, n: int) -> None:
        for i in range(n):
            store.update_run(rid, lambda d, s=statuses[i % 2]: d.set_status(s), attempts=100)  # type: ignore[misc]

    threads = [threading.Thread(target=writer, args=(s, 6)) for s in (a, a, b, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    doc = a.load_run(rid)
    assert doc.version == 1 + 4 * 6
    row = _summary(b, rid)
    assert (row[2], row[9]) == (doc.status.value, doc.version)
    assert [(r.id, r.status, r.version) for r in b.index_rows()] == [(rid, doc.status.value, doc.version)]


_WRITER_NEVER_CLOSING = """
import sys
from iterion.store import RunDoc, RunStatus
from iterion.store.jetstream import JetStreamStore
import asyncio
store = JetStreamStore(sys.argv[1], prefix=sys.argv[2])  # never closed, as the commands leave it
real = store._unmark_pending
async def slow(key, marker=None):  # a purge still in flight when the process ends
    await asyncio.sleep(0.5)
    await real(key, marker)
store._unmark_pending = slow
store.create_run(RunDoc(id=sys.argv[3], name="exits", workflow_name="a", workspace_dir="/w"))
store.update_run(sys.argv[3], lambda d: d.set_status(RunStatus.RUNNING))
"""


def test_a_process_exiting_without_close_leaves_no_marker(stores: list[JetStreamStore],
                                                          nats_server: NatsServer) -> None:
    """The commands never close their store; the purge of their last write's marker, sent
    without waiting, is still waited for at exit (else every command would leave the next
    listing a repair to make)."""
    import subprocess
    import sys

    from tests.storeconf.conftest import REPO

    store = stores[0]
    rid = new_id()
    proc = subprocess.run([sys.executable, "-c", _WRITER_NEVER_CLOSING, nats_server.url, store.prefix, rid],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _markers(store) == {}
    row = _summary(store, rid)
    assert (row[2], row[9]) == ("running", 2)
