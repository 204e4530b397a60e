"""The run index (iterion/store/runindex.py; docs/technical/durability.md "Run index"): a
SIGKILL between run.json and the index loses nothing, a damaged or missing index is rebuilt with
a warning, and every page and filter returns exactly what a full scan of the documents does."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iterion.store import RunDoc, Store, new_id
from iterion.store.docstore import CorruptRun
from iterion.store.runindex import INDEX_FILE, PENDING_DIR, select
from iterion.store.status import RunStatus


def _doc(workflow: str = "tidy", name: str | None = None) -> RunDoc:
    rid = new_id()
    return RunDoc(id=rid, name=name or f"r-{rid[-6:]}", workflow_name=workflow, workspace_dir="/tmp/ws")


def _full_scan(store: Store) -> dict[str, str]:
    """id -> status, from the documents themselves (no index)."""
    return {e.id: e.status if isinstance(e, CorruptRun) else e.status.value for e in store.docs.list_entries()}


def _listed(store: Store) -> dict[str, str]:
    """id -> status as a fresh process's listing reads it (a new Store: no in-memory cache)."""
    fresh = Store(store.root)
    return {r.id: r.status for r in fresh.run_page(limit=None).rows}


def test_every_write_updates_the_index_and_the_list_matches_the_documents(store: Store) -> None:
    a = store.create_run(_doc())
    b = store.create_run(_doc())
    store.update_run(a.id, lambda d: d.set_status(RunStatus.RUNNING))
    store.update_run(a.id, lambda d: d.set_status(RunStatus.FAILED_RESUMABLE, failure_code="boom", error="x"))
    assert _listed(store) == _full_scan(store) == {a.id: "failed_resumable", b.id: "queued"}
    raw = json.loads((store.root / INDEX_FILE).read_text())
    assert [r[0] for r in raw["rows"]] == sorted([a.id, b.id])
    assert not list((store.root / PENDING_DIR).iterdir())  # every marker removed after its write
    (row,) = [r for r in Store(store.root).run_page(limit=None).rows if r.id == a.id]
    assert (row.failure_code, row.error, row.version) == ("boom", "x", 3)


_KILLED_WRITER = """
import sys
from pathlib import Path
from iterion.store import Store
from iterion.store.status import RunStatus
store = Store(Path(sys.argv[1]))
if sys.argv[2] == "create":
    from iterion.store import RunDoc
    store.create_run(RunDoc(id=sys.argv[3], name="killed", workflow_name="tidy", workspace_dir="/tmp/ws"))
else:
    store.update_run(sys.argv[3], lambda d: d.set_status(RunStatus.RUNNING))
"""


@pytest.mark.parametrize("step", ["create", "update"])
def test_a_sigkill_between_the_document_and_the_index_loses_nothing(store: Store, step: str) -> None:
    """kill point ``run-index``: run.json written, its row not. The next listing shows the run
    with the document's status, and saves the repair."""
    store.create_run(_doc())  # an index exists before the killed write
    rid = new_id()
    if step == "update":
        store.create_run(RunDoc(id=rid, name="killed", workflow_name="tidy", workspace_dir="/tmp/ws"))
    before = (store.root / INDEX_FILE).read_bytes()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED_WRITER), str(store.root), step, rid],
                          env={**os.environ, "ITERION_TEST_KILL_AT": "run-index:1"}, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (store.root / INDEX_FILE).read_bytes() == before  # the kill landed before the index write
    assert (store.root / PENDING_DIR / rid).exists()
    want = "queued" if step == "create" else "running"
    assert store.load_run(rid).status.value == want
    assert _listed(store)[rid] == want
    assert _listed(store) == _full_scan(store)
    assert not (store.root / PENDING_DIR / rid).exists()  # repaired and recorded
    rows = {r[0]: r for r in json.loads((store.root / INDEX_FILE).read_text())["rows"]}
    assert rows[rid][2] == want
    assert Store(store.root).resolve_run("killed") == rid  # name resolution sees it too


@pytest.mark.parametrize("damage", ["missing", "garbage", "other-format", "truncated"])
def test_a_missing_or_corrupt_index_is_rebuilt_with_a_warning(store: Store, damage: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    docs = [store.create_run(_doc()) for _ in range(3)]
    store.update_run(docs[1].id, lambda d: d.set_status(RunStatus.RUNNING))
    index = store.root / INDEX_FILE
    if damage == "missing":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"\x00not json")
    elif damage == "other-format":
        index.write_text(json.dumps({"format_version": 99, "rows": []}))
    else:
        index.write_bytes(index.read_bytes()[:40])
    with caplog.at_level(logging.WARNING, logger="iterion.store.runindex"):
        assert _listed(store) == _full_scan(store)
    assert any("rebuilt from the run documents" in r.getMessage() for r in caplog.records)
    assert json.loads(index.read_text())["format_version"] == 1  # saved again
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="iterion.store.runindex"):
        assert _listed(store) == _full_scan(store)
    assert not caplog.records  # once rebuilt, no more warnings


def test_runs_made_or_removed_behind_the_index_are_seen(store: Store) -> None:
    """A run directory copied in or deleted (gc, an older iterion, a person) changes runs/'s mtime."""
    keep, gone = store.create_run(_doc()), store.create_run(_doc())
    import shutil

    shutil.rmtree(store.run_dir(gone.id))
    other = Store(store.root.parent / "other")
    copied = other.create_run(_doc())
    shutil.copytree(other.run_dir(copied.id), store.run_dir(copied.id))
    assert _listed(store) == _full_scan(store) == {keep.id: "queued", copied.id: "queued"}


def test_a_document_damaged_after_indexing_lists_as_corrupt(store: Store) -> None:
    doc = store.create_run(_doc())
    store.paths(doc.id).run_json.write_bytes(b'{"id": garbage')
    (row,) = Store(store.root).run_page(limit=None).rows
    assert row.status == "corrupt" and row.error


def test_the_cursor_pages_through_every_run_once(store: Store) -> None:
    ids = [store.create_run(_doc()).id for _ in range(7)]
    seen: list[str] = []
    after = None
    while True:
        page = store.run_page(limit=3, after=after)
        seen += [r.id for r in page.rows]
        assert page.total == 7 and page.more == 7 - len(seen)
        if page.next is None:
            break
        after = page.next
    assert seen == sorted(ids, reverse=True)


# -- pages and filters == a full scan, over random run sets ---------------------------------------
_STATUS_PATHS = {
    "queued": [],
    "running": [RunStatus.RUNNING],
    "finished": [RunStatus.RUNNING, RunStatus.FINISHED],
    "failed_resumable": [RunStatus.RUNNING, RunStatus.FAILED_RESUMABLE],
    "cancelled": [RunStatus.RUNNING, RunStatus.CANCELLED],
}
_run = st.tuples(st.sampled_from(sorted(_STATUS_PATHS)), st.sampled_from(["a", "b", "c"]),
                 st.integers(min_value=0, max_value=5), st.booleans())


def _set(status: RunStatus) -> Callable[[RunDoc], None]:
    return lambda d: d.set_status(status)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=st.lists(_run, max_size=14), status=st.sets(st.sampled_from([*_STATUS_PATHS, "corrupt"])),
       workflow=st.sampled_from([None, "a", "b", "c"]), since_days=st.sampled_from([None, 0, 2, 4, 9]),
       limit=st.integers(min_value=1, max_value=5))
def test_pages_and_filters_equal_a_full_scan(tmp_path_factory: pytest.TempPathFactory, runs: list[tuple[str, str, int, bool]],
                                             status: set[str], workflow: str | None, since_days: int | None,
                                             limit: int) -> None:
    store = Store(tmp_path_factory.mktemp("s") / ".iterion")
    now = datetime.now(UTC)
    for want, wf, age_days, corrupt in runs:
        doc = store.create_run(_doc(wf))
        for s in _STATUS_PATHS[want]:
            store.update_run(doc.id, _set(s))
        # an older creation date, written behind the index (as an edit would: listings re-check)
        path = store.paths(doc.id).run_json
        raw = json.loads(path.read_text())
        raw["created_at"] = (now - timedelta(days=age_days)).isoformat()
        path.write_text(json.dumps(raw) if not corrupt else "{broken")
    since = now - timedelta(days=since_days, hours=12) if since_days is not None else None
    # the full scan, filtered and ordered by hand
    scan = []
    for e in store.docs.list_entries():
        st_ = e.status if isinstance(e, CorruptRun) else e.status.value
        wf_ = None if isinstance(e, CorruptRun) else e.workflow_name
        created = None if isinstance(e, CorruptRun) else e.created_at
        if status and st_ not in status or workflow is not None and wf_ != workflow:
            continue
        if since is not None and (created is None or created < since):
            continue
        scan.append((e.id, st_))
    scan.sort(reverse=True)
    # rebuilt from the documents (what a stale index must come back to), then paged
    (store.root / INDEX_FILE).unlink(missing_ok=True)
    fresh = Store(store.root)
    got, after = [], None
    while True:
        page = fresh.run_page(status=status or None, workflow=workflow, since=since, after=after, limit=limit)
        assert page.total == len(scan)
        got += [(r.id, r.status) for r in page.rows]
        if page.next is None:
            break
        after = page.next
    assert got == scan
    assert select(fresh.index_rows(), status=status or None, workflow=workflow, since=since).rows == \
        [r for r in sorted(fresh.index_rows(), key=lambda r: r.id, reverse=True) if (r.id, r.status) in set(scan)]


def test_updates_append_to_the_log_and_a_big_log_is_merged(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A status change appends its row to run-index.log (no rewrite of the whole index); past
    LOG_COMPACT bytes a write merges the log into the index and empties it. A log applied twice
    (a kill between the index's replace and the log's truncation) changes nothing."""
    from iterion.store import runindex

    monkeypatch.setattr(runindex, "LOG_COMPACT", 2000)
    runs = [store.create_run(_doc()) for _ in range(3)]
    index, log = store.root / INDEX_FILE, store.root / runindex.LOG_FILE
    before = index.read_bytes()
    store.update_run(runs[0].id, lambda d: d.set_status(RunStatus.RUNNING))
    assert index.read_bytes() == before and log.stat().st_size > 0  # appended, not rewritten
    assert _listed(store) == _full_scan(store)
    kept_log = log.read_bytes()
    for i in range(12):
        store.update_run(runs[i % 3].id, lambda d: setattr(d, "error", f"e{i}"))
    assert log.stat().st_size < 2000 and index.read_bytes() != before  # merged at least once
    store.update_run(runs[1].id, lambda d: d.set_status(RunStatus.FAILED_RESUMABLE, failure_code="x"))
    assert _listed(store) == _full_scan(store)
    log.write_bytes(kept_log + log.read_bytes())  # older rows again: a replayed log
    assert _listed(store) == _full_scan(store)
    assert {r.id: r.error for r in Store(store.root).run_page(limit=None).rows}[runs[2].id] == "e11"


def test_a_torn_log_line_ends_the_log(store: Store) -> None:
    """A write killed mid-append leaves a torn last line (and its pending marker): the rows
    before it stand, the torn one is ignored, the marker repairs that run."""
    from iterion.store import runindex

    a, b = store.create_run(_doc()), store.create_run(_doc())
    store.update_run(a.id, lambda d: d.set_status(RunStatus.RUNNING))
    log = store.root / runindex.LOG_FILE
    store.docs.index.mark_pending(b.id)  # type: ignore[attr-defined]  (as the killed writer did)
    doc = store.load_run(b.id)
    doc.status = RunStatus.CANCELLED
    (store.runs_dir / b.id / "run.json").write_text(doc.model_dump_json())
    with log.open("ab") as f:
        f.write(b'["' + b.id.encode() + b'",null,"canc')
    assert _listed(store) == _full_scan(store) == {a.id: "running", b.id: "cancelled"}
