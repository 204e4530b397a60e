"""The ref layout: every builder round-trips through parse_ref; bad ids name the bad character."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitrefs import layout
from gitrefs.boundary import BANK_KIND, BoundaryKind, BoundaryLabel
from gitrefs.errors import RefLayoutError
from gitrefs.ids import InvalidIdError
from tests.conftest import REPO_ROOT, git

ids = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}[A-Za-z0-9_]", fullmatch=True).filter(
    lambda s: ".." not in s and not s.endswith(".lock"))


@given(run=ids, node=ids, it=st.integers(min_value=0, max_value=10**6),
       kind=st.sampled_from(list(BoundaryKind)))
def test_boundary_refs_round_trip(run: str, node: str, it: int, kind: BoundaryKind) -> None:
    label = BoundaryLabel(kind, node, it)
    name = layout.boundary_ref(run, label)
    assert name == f"refs/iterion/runs/{run}/{kind.value}/{node}/{it}"
    parsed = layout.parse_ref(name)
    assert (parsed.run_id, parsed.kind, parsed.node, parsed.number) == (run, kind.value, node, it)
    assert parsed.label == label


def test_other_refs_round_trip() -> None:
    assert layout.parse_ref(layout.head_ref("r")) == layout.ParsedRef("r", "head")
    assert layout.parse_ref(layout.base_ref("r")) == layout.ParsedRef("r", "base")
    bank = layout.parse_ref(layout.bank_ref("r", "build", 3))
    assert (bank.kind, bank.node, bank.number, bank.label) == (BANK_KIND, "build", 3, None)
    cp = layout.parse_ref(layout.checkpoint_ref("r", 7))
    assert (cp.kind, cp.number) == ("checkpoints", 7)


def test_refs_pass_git_check_ref_format() -> None:
    names = [layout.boundary_ref("run-1.x", BoundaryLabel(BoundaryKind.PAUSE, "ask_human", 2)),
             layout.bank_ref("run-1.x", "n", 1), layout.head_ref("run-1.x"),
             layout.checkpoint_ref("run-1.x", 4)]
    for name in names:
        git(REPO_ROOT, "check-ref-format", name)  # a refused name fails the test here


@pytest.mark.parametrize("bad, named", [("a b", "space"), ("a~b", "'~'"), ("a:b", "':'"), ("a/b", "'/'"),
                                        ("a^b", "'^'"), ("a?b", "'?'"), ("a*b", "'*'"), ("a[b", "'['"),
                                        ("a\\b", "backslash"), ("a\x01b", "control character"),
                                        ("a..b", "'..'"), ("x.lock", "'.lock'"), (".a", "starts with '.'")])
def test_bad_run_and_node_ids_are_refused_naming_the_character(bad: str, named: str) -> None:
    with pytest.raises(InvalidIdError, match=re.escape(named)):
        layout.head_ref(bad)
    with pytest.raises(InvalidIdError):
        layout.bank_ref("ok", bad, 1)


@pytest.mark.parametrize("name", ["refs/heads/main", "refs/iterion/runs/r/post/n/0",
                                  "refs/iterion/runs/r/nodes/n/x",
                                  "refs/iterion/runs/r/nodes/n", "refs/iterion/runs/r/rewind/n/1/2",
                                  "refs/iterion/runs/a b/head"])
def test_parse_refuses_foreign_refs(name: str) -> None:
    with pytest.raises(RefLayoutError):
        layout.parse_ref(name)
