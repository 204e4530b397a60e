"""One contract, both versioning mechanisms: worktree runs (gitrefs boundary commits) and in-place
runs (the workspacetrack tracker) must answer mark, chain, produced scope, restore and bank alike.

Each test runs once per mechanism on a real repository; where the mechanisms deliberately differ
(a produced scope is refused on a worktree run) the test says so in one place: ``SCOPES``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from iterion.engine.versioning import Versioning, open_versioning
from iterion.rewind.errors import RewindError
from iterion.rewind.files import RestoreScope, check_scope, restore_files
from tests.conftest import make_checkout

MECHANISMS = ["gitrefs", "workspacetrack"]
# the scopes each mechanism accepts (the one deliberate difference: git reverts whole trees)
SCOPES = {"gitrefs": [RestoreScope.FULL], "workspacetrack": [RestoreScope.FULL, RestoreScope.PRODUCED]}


def L(kind: str, node: str, it: int = 0) -> BoundaryLabel:
    return BoundaryLabel(BoundaryKind(kind), node, it)


@pytest.fixture(params=MECHANISMS)
def mech(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path, Versioning]]:
    ws = make_checkout(tmp_path / "ws")
    v = open_versioning(worktree=request.param == "gitrefs", workspace=ws, run_dir=tmp_path / "run",
                        run_id="r1", start=True, watch=False)
    try:
        yield request.param, ws, v
    finally:
        v.close()


def three_nodes(ws: Path, v: Versioning) -> None:
    """a writes a.txt; b rewrites a.txt, creates b.txt, deletes README.md; c creates c/deep.txt."""
    v.mark(L("pre", "a"))
    (ws / "a.txt").write_text("a0\n")
    v.mark(L("nodes", "a"))
    v.mark(L("pre", "b"))
    (ws / "a.txt").write_text("a by b\n")
    (ws / "b.txt").write_bytes(b"\x00\xffbinary\n")
    (ws / "README.md").unlink()
    v.mark(L("nodes", "b"))
    v.mark(L("pre", "c"))
    (ws / "c").mkdir()
    (ws / "c" / "deep.txt").write_text("c\n")
    v.mark(L("nodes", "c"))
    v.mark(L("pause", "c"))


def test_chain_lists_every_mark_in_order(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    assert v.labels() == ["pre:a:0", "nodes:a:0", "pre:b:0", "nodes:b:0", "pre:c:0", "nodes:c:0", "pause:c:0"]
    assert v.has(L("pre", "b")) and not v.has(L("pre", "zzz"))
    states = [e.state for e in v.chain()]
    assert states[0] != states[1]  # a changed the tree
    assert states[1] == states[2]  # nothing between nodes:a and pre:b


def test_changed_paths_between_two_states(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    by = {str(e.label): e.state for e in v.chain()}
    assert v.changed_paths(by["pre:b:0"], by["nodes:b:0"]) == {"a.txt", "b.txt", "README.md"}
    assert v.changed_paths(by["pre:c:0"], by["nodes:c:0"]) == {"c/deep.txt"}


def test_produced_scope_is_what_the_dropped_nodes_wrote(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    scope = v.produced_scope(L("pre", "b"))
    assert set(scope.paths) == {"a.txt", "b.txt", "README.md", "c/deep.txt"}


def test_full_restore_puts_the_anchor_tree_back_and_banks_the_rest(mech: tuple[str, Path, Versioning]) -> None:
    name, ws, v = mech
    three_nodes(ws, v)
    report = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=ws, protected=[])
    assert report.mechanism == name and report.anchor == "pre:b:0"
    assert (ws / "a.txt").read_text() == "a0\n"
    assert (ws / "README.md").read_text() == "hello\n"
    assert not (ws / "b.txt").exists() and not (ws / "c" / "deep.txt").exists()
    assert sorted(report.restored) == ["README.md", "a.txt"]
    assert sorted(report.removed) == ["b.txt", "c/deep.txt"]
    assert report.overwritten == [] and report.skipped == []
    assert report.backup_ref  # the bank: the pre-rewind state, kept


def test_dry_run_previews_and_changes_nothing(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    before = {p.relative_to(ws).as_posix(): p.read_bytes() for p in ws.rglob("*")
              if p.is_file() and ".git" not in p.parts}
    preview = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=ws, protected=[], dry_run=True)
    after = {p.relative_to(ws).as_posix(): p.read_bytes() for p in ws.rglob("*")
             if p.is_file() and ".git" not in p.parts}
    assert before == after
    assert set(preview.in_scope) == {"a.txt", "b.txt", "README.md", "c/deep.txt"}


def test_a_persons_edit_after_the_last_boundary_is_never_lost(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    (ws / "a.txt").write_text("the person's own edit\n")  # a produced path, edited after the run parked
    report = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=ws, protected=[])
    # either left in place, or overwritten, named, and brought back by the printed undo command
    if (ws / "a.txt").read_text() == "the person's own edit\n":
        assert "a.txt" in report.left_in_place
        return
    assert "a.txt" in report.overwritten and report.undo
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(report.undo, shell=True, check=True, env=env, capture_output=True)
    assert (ws / "a.txt").read_text() == "the person's own edit\n"


def test_protected_sources_are_never_restored(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    (ws / "b.txt").write_text("now the workflow source\n")
    report = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=ws, protected=["b.txt"])
    assert (ws / "b.txt").read_text() == "now the workflow source\n"
    assert "b.txt" not in report.removed and "b.txt" not in report.restored


def test_scopes_each_mechanism_accepts(mech: tuple[str, Path, Versioning]) -> None:
    name, _, _ = mech
    for scope in (RestoreScope.FULL, RestoreScope.PRODUCED):
        if scope in SCOPES[name]:
            check_scope(name == "gitrefs", scope)
        else:
            with pytest.raises(RewindError):
                check_scope(name == "gitrefs", scope)


def test_restoring_to_an_unrecorded_boundary_is_refused(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    with pytest.raises(RewindError):
        restore_files(v, L("pre", "nosuch"), RestoreScope.FULL, workspace=ws, protected=[])
    assert (ws / "c" / "deep.txt").exists()
