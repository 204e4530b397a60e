"""A manifest's bytes written by ``_fastwalk.sorted_json`` (C) and by pydantic (the Python way)
are the same bytes, for every name and value a manifest can hold: so a manifest's digest never
depends on whether the extension was built, and equal states hash equal across both."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workspacetrack import store as store_mod
from workspacetrack.fastext import FAST
from workspacetrack.models import Manifest
from workspacetrack.store import _stored_manifest

pytestmark = pytest.mark.skipif(FAST is None, reason="the C extension is built on every supported install")

# names as the tracker holds them: any text, control characters, quotes and backslashes, and
# bytes that are not UTF-8 (lone surrogates: those go the wire-form way)
_names = st.one_of(
    st.text(min_size=1, max_size=12),
    st.text(alphabet=st.sampled_from('a/"\\\x00\x01\x08\x0c\x1f\x7f\n\r\té\u2028😀'), min_size=1, max_size=8),
    # long enough for the 8-byte scan, one character to escape anywhere in it
    st.tuples(st.integers(0, 40), st.sampled_from('"\\\x00\x1f\n\x7f\x20é'), st.integers(0, 40)).map(
        lambda t: "p" * t[0] + t[1] + "q" * t[2]),
    st.binary(min_size=1, max_size=8).map(os.fsdecode),
)
_ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 0o100644, 0o120777, 2**40]))
_entries = st.dictionaries(_names, st.tuples(st.text(max_size=6), _ints, _ints, st.none() | _names), max_size=20)
_skipped = st.dictionaries(_names, st.sampled_from(["oversized", "special_file", "unreadable", 'q"\\\n']), max_size=5)


def _both(entries: dict, skipped: dict, monkeypatch: pytest.MonkeyPatch, **fields: object) -> tuple:
    out = []
    for fast in (FAST, None):
        with monkeypatch.context() as m:
            m.setattr(store_mod, "FAST", fast)
            out.append(_stored_manifest(entries, skipped, None, **fields))
    return out[0], out[1]


@settings(max_examples=300, deadline=None)
@given(entries=_entries, skipped=_skipped)
def test_the_same_bytes_and_the_same_manifest(entries: dict, skipped: dict) -> None:
    with pytest.MonkeyPatch.context() as mp:
        (m_c, data_c), (m_py, data_py) = _both(entries, skipped, mp, ids="git")
    assert data_c == data_py
    assert m_c.entries == m_py.entries and m_c.skipped == m_py.skipped
    # and what is stored reads back as the state it records
    back = Manifest.model_validate_json(data_c)
    assert len(back.entries) == len(entries) and len(back.skipped) == len(skipped)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_a_delta_shell_with_removed_paths_and_lists_as_values(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = {"b": ["1" * 40, 0o100644, 3, None], "a": ("2" * 40, 0o120777, 1, "t\n")}
    (_, data_c), (_, data_py) = _both(entries, {"z": "oversized"}, monkeypatch, base="x" * 64,
                                      removed=["c", os.fsdecode(b"\xff")], depth=3, ids="git")
    assert data_c == data_py
    assert data_c.index(b'"a":') < data_c.index(b'"b":')  # stored in key order


def test_a_value_c_does_not_take_goes_the_python_way(monkeypatch: pytest.MonkeyPatch) -> None:
    assert FAST is not None
    assert FAST.sorted_json({"a": ("h", True, 1, None)}, True) is None  # a bool is not an int
    assert FAST.sorted_json({"a": ("h", 2**64, 1, None)}, True) is None  # beyond 64 bits
    assert FAST.sorted_json({os.fsdecode(b"\xff"): "unreadable"}, False) is None  # not UTF-8
    assert FAST.sorted_json({"a": ("h", 1, 1)}, True) is None  # not an entry's shape
    # the manifest is still written, the Python way, to the same effect
    (_, data_c), (_, data_py) = _both({"a": ("h", 2**64, 1, None)}, {}, monkeypatch, ids="git")
    assert data_c == data_py


def test_every_ascii_character_at_every_place_of_a_long_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C writer copies 8 bytes at a time while none needs escaping: each ASCII character at
    each of 16 places (both 8-byte halves) is written as pydantic writes it."""
    keys = {"a" * p + chr(c) + "b" * (15 - p): "unreadable" for c in range(0, 128) for p in range(16)}
    (_, data_c), (_, data_py) = _both({}, keys, monkeypatch, ids="git")
    assert data_c == data_py
