"""The run index on both backends (iterion/store/runindex.py; JetStream: the summaries bucket):
pages and filters equal a full scan of the documents, and a row behind its document (a writer
killed between the two writes) is repaired by the next listing."""

from __future__ import annotations

import random

from iterion.store import RunDoc, RunStatus, Store, new_id
from iterion.store.docstore import CorruptRun
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
