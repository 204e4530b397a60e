"""The summaries snapshot's format (iterion/store/jetstream/snapshot.py): format 2 reads back
exactly what was written (ids needing a ``=hex`` key included), format 1 is still read (and
said to be old, so the next listing rewrites it), and anything else is ignored, never half-read.
(The snapshot on a real nats-server: tests/storeconf/test_run_index.py.)"""

from __future__ import annotations

import json
import zlib

from hypothesis import given
from hypothesis import strategies as st

from iterion.store.jetstream import snapshot
from iterion.store.jetstream.tokens import run_token
from iterion.store.runindex import IndexRow

_text = st.none() | st.text(max_size=8)
_rows = st.builds(IndexRow, id=st.from_regex(r"[0-9a-f]{6}|[a-z]{2}\.[a-z]{2}", fullmatch=True), name=_text,
                  status=st.sampled_from(["running", "finished", "corrupt"]), workflow=_text, created=_text,
                  updated=_text, failure_code=_text, error=_text, mode=_text, version=st.integers(-1, 9),
                  parent=_text, mtime_ns=st.integers(0, 2**40), size=st.just(0))


@given(st.lists(_rows, max_size=12))
def test_format_2_reads_back_what_was_written(rows: list[IndexRow]) -> None:
    by_key = {run_token(r.id): r for r in rows}
    got = snapshot.decode(snapshot.encode(by_key, stream="s1", upto=7), stream="s1", last_seq=7)
    assert got == snapshot.Snapshot(by_key, 7, True)


def test_format_1_is_still_read_and_marked_old() -> None:
    row = IndexRow("0a1b", "n", "finished", "wf", "2026-01-01T00:00:00+00:00", None, None, None, "in_place", 3,
                   None, 12, 0)
    old = {"format_version": 1, "stream": "s1", "upto": 5, "rows": {"0a1b": list(row), "bad": [1, 2]}}
    got = snapshot.decode(zlib.compress(json.dumps(old).encode()), stream="s1", last_seq=9)
    assert got == snapshot.Snapshot({"0a1b": row}, 5, False)  # a damaged row is left out, not guessed


def test_an_unusable_snapshot_is_ignored() -> None:
    rows = {"0a1b": IndexRow("0a1b", "n", "finished", "wf", None, None, None, None, None, 1, None, 3, 0)}
    good = snapshot.encode(rows, stream="s1", upto=5)
    body = json.loads(zlib.decompress(good))
    assert snapshot.decode(good, stream="s2", last_seq=9) is None  # another incarnation of the bucket
    assert snapshot.decode(good, stream="s1", last_seq=4) is None  # ahead of the bucket
    assert snapshot.decode(good[:-3], stream="s1", last_seq=9) is None  # torn
    assert snapshot.decode(b"garbage", stream="s1", last_seq=9) is None
    for change in ({"format_version": 3}, {"fields": body["fields"][:-1]}, {"columns": body["columns"][:-1]},
                   {"columns": [c + ["x"] if i == 2 else c for i, c in enumerate(body["columns"])]}, {"keys": []}):
        damaged = zlib.compress(json.dumps({**body, **change}).encode())
        assert snapshot.decode(damaged, stream="s1", last_seq=9) is None, change
