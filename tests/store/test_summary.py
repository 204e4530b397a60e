"""The run list reads run documents plainly (iterion/store/summary.py) and agrees with RunDoc.

Whenever the plain reader answers, its fields are what the RunDoc model reads from the same
bytes; whenever a listed field is not as iterion writes it, it leaves the document to the model,
so the list shows the same runs, statuses and `corrupt` entries (same words) as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from iterion.failure_codes import FailureCode
from iterion.store import RunDoc, RunStatus, Store, new_id
from iterion.store.docstore import CorruptRun
from iterion.store.summary import RUN_DOC_FORMAT_VERSION, RunSummary, read_summary
from gitrefs.persist import FormatVersionError


def _written(store: Store, **fields: Any) -> dict[str, Any]:
    doc = store.create_run(RunDoc(id=new_id(), name="wf-calm-otter", workflow_name="wf", workspace_dir="/w",
                                  workflow_source="agent a:\n", vars={"x": [1, "ü"]}, **fields))
    store.update_run(doc.id, lambda d: d.set_status(RunStatus.RUNNING))
    store.update_run(doc.id, lambda d: d.set_status(RunStatus.FAILED_RESUMABLE,
                                                   failure_code=FailureCode.BUDGET_EXCEEDED.value, error="cap"))
    data: dict[str, Any] = json.loads(store.paths(doc.id).run_json.read_bytes())
    return data


# edits of a written document: (what, the edit, whether the plain reader must leave it to the model)
EDITS: list[tuple[str, Any, bool]] = [
    ("as written", lambda d: None, False),
    ("another status", lambda d: d.update(status="finished", failure_code=None), False),
    ("an offset time", lambda d: d.update(created_at="2026-12-03T10:00:00.5+02:00"), False),
    ("no fraction", lambda d: d.update(created_at="2026-12-03T10:00:00Z"), False),
    ("older format", lambda d: d.pop("format_version"), False),
    ("null format", lambda d: d.update(format_version=None), False),
    ("unknown field", lambda d: d.update(later_field={"x": 1}), False),
    ("newer format", lambda d: d.update(format_version=RUN_DOC_FORMAT_VERSION + 1), True),
    ("format as text", lambda d: d.update(format_version="1"), True),
    ("unknown status", lambda d: d.update(status="exploded"), True),
    ("no status", lambda d: d.pop("status"), True),
    ("status not text", lambda d: d.update(status=3), True),
    ("no name", lambda d: d.pop("name"), True),
    ("name not text", lambda d: d.update(name=["x"]), True),
    ("id not text", lambda d: d.update(id=42), True),
    ("no workflow", lambda d: d.pop("workflow_name"), True),
    ("failure code not text", lambda d: d.update(failure_code=5), True),
    ("naive time", lambda d: d.update(created_at="2026-12-03T10:00:00"), True),
    ("unix time", lambda d: d.update(created_at=1764755000), True),
    ("no such day", lambda d: d.update(created_at="2026-02-30T10:00:00Z"), True),
    ("no time", lambda d: d.pop("created_at"), True),
]


def _model(data: bytes) -> RunDoc | None:
    try:
        return RunDoc.model_validate_json(data)
    except (ValidationError, FormatVersionError):
        return None


@pytest.mark.parametrize(("what", "edit", "left_to_model"), EDITS, ids=[e[0] for e in EDITS])
def test_the_plain_read_is_the_models_read_or_none(tmp_path: Path, what: str, edit: Any, left_to_model: bool) -> None:
    data = _written(Store(tmp_path / "s"))
    edit(data)
    raw = json.dumps(data, indent=2, ensure_ascii=False).encode()
    plain, model = read_summary(raw), _model(raw)
    if left_to_model:
        assert plain is None, what
    else:
        assert model is not None and plain == RunSummary.of(model), what
        assert plain.created_at.utcoffset() is not None


@pytest.mark.parametrize("raw", [b"", b"{ not json", b"[]", b'"x"', b"\xef\xbb\xbf{}", b'{"id": NaN}',
                                 "{\"id\": \"\\ud800\"}".encode(), b"\xff\xfe{", b'{"a": 1} trailing'])
def test_what_is_not_a_plain_json_object_is_left_to_the_model(raw: bytes) -> None:
    assert read_summary(raw) is None


def test_the_list_shows_the_same_runs_as_the_documents(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    for _ in EDITS:
        _written(store)
    runs = sorted(store.runs_dir.iterdir())
    for run_dir, (_, edit, _) in zip(runs, EDITS, strict=True):
        data = json.loads((run_dir / "run.json").read_bytes())
        edit(data)
        (run_dir / "run.json").write_text(json.dumps(data))
    (runs[0] / "run.json").write_text("{ not json")  # unreadable: corrupt, in the model's words
    (store.runs_dir / "not-a-run").mkdir()  # a stray directory with a run.json: corrupt in both
    (store.runs_dir / "not-a-run" / "run.json").write_text("{}")
    entries, summaries = store.list_entries(), store.list_summaries()
    assert [e.id for e in entries] == [s.id for s in summaries]
    for entry, summary in zip(entries, summaries, strict=True):
        if isinstance(entry, CorruptRun):
            assert summary == entry
            continue
        expected = RunSummary.of(entry)
        if b'"created_at"' not in store.paths(entry.id).run_json.read_bytes():  # the model's default: now
            expected = expected._replace(created_at=summary.created_at)
        assert summary == expected
    assert sum(isinstance(e, CorruptRun) for e in summaries) >= 10


def test_naive_times_read_as_utc_so_the_list_and_gc_can_compare_them(tmp_path: Path) -> None:
    """A hand-edited document with times without an offset: read as UTC (ours always carry
    one), never a TypeError when `inspect` computes an age or `gc` an age limit."""
    from datetime import UTC, datetime

    store = Store(tmp_path / "s")
    data = _written(store)
    data.update(created_at="2026-12-03T10:00:00", updated_at="2026-12-03T10:00:01",
                finished_at="2026-12-03T10:00:02")
    run_json = store.paths(data["id"]).run_json
    run_json.write_text(json.dumps(data))
    doc = store.load_run(data["id"])
    assert doc.created_at == datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)
    assert doc.finished_at is not None and doc.finished_at.utcoffset() is not None
    (summary,) = store.list_summaries()
    assert isinstance(summary, RunSummary) and summary.created_at == doc.created_at
    assert (datetime.now(UTC) - summary.created_at).total_seconds() > 0  # the age `inspect` shows
