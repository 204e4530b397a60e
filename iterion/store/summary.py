"""The run list's view of a run document: the fields `iterion inspect` lists, read without pydantic.

Listing runs reads every run document of the store. Validating each whole document (its
recorded workflow sources included) through the ``RunDoc`` model would first import pydantic
and build the model's validators, over a third of the command's start (issue 14, point 10). So
``read_summary`` reads a document iterion wrote with ``json`` alone and checks the listed fields
by RunDoc's rules; whenever the document is anything else (not UTF-8 JSON, not an object, a
listed field absent or of another type, a date in another form, another format version) it
answers None and the caller reads the document through RunDoc instead
(``FsRunDocs.list_summaries``), so a damaged document is listed as ``corrupt`` in the model's
own words, as before.

Invariant: whenever ``read_summary`` answers, its fields equal what ``RunDoc`` reads from the
same bytes (tests/store/test_summary.py checks both on written, edited and damaged documents).
Fields the list does not show are not checked here: a document damaged only there is listed
with its status, and names its damage when the run is opened (``inspect --run-id``, ``resume``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from iterion.store.status import RunStatus

if TYPE_CHECKING:
    from iterion.store.run_doc import RunDoc

# RunDoc's FORMAT_VERSION (gitrefs.persist.model.VersionedModel); run_doc.py takes it from here
RUN_DOC_FORMAT_VERSION = 2  # 2: children (the run's live process groups)

# the form a timezone-aware datetime takes in iterion's JSON (pydantic's dump of utcnow())
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_STATUSES = {s.value: s for s in RunStatus}


class RunSummary(NamedTuple):
    """A run as the run list shows it (RunDoc's names, so either reads the same)."""

    id: str
    name: str
    status: RunStatus
    workflow_name: str
    created_at: datetime
    failure_code: str | None

    @classmethod
    def of(cls, doc: RunDoc) -> RunSummary:
        return cls(doc.id, doc.name, doc.status, doc.workflow_name, doc.created_at, doc.failure_code)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN/Infinity: left to the model's parser


def read_summary(data: bytes) -> RunSummary | None:
    """The listed fields of the run document ``data``, or None when only RunDoc can say (see the
    module doc: a None is never an error by itself)."""
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except ValueError:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return None
    if type(doc) is not dict:
        return None
    version = doc.get("format_version")
    if version is not None and (type(version) is not int or version > RUN_DOC_FORMAT_VERSION):
        return None
    run_id, name, workflow = doc.get("id"), doc.get("name"), doc.get("workflow_name")
    status = _STATUSES.get(doc["status"]) if type(doc.get("status")) is str else None
    failure = doc.get("failure_code")
    stamp = doc.get("created_at")
    if not (type(run_id) is str and type(name) is str and type(workflow) is str and status is not None
            and (failure is None or type(failure) is str) and type(stamp) is str and _STAMP.fullmatch(stamp)):
        return None
    if any(_has_surrogate(s) for s in (run_id, name, workflow, failure or "")):
        return None  # an escaped lone surrogate: the model's parser decides what that is
    try:
        created = datetime.fromisoformat(stamp)
    except ValueError:  # e.g. 2026-02-30
        return None
    return RunSummary(run_id, name, status, workflow, created, failure)


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)
