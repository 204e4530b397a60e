"""One contract, every versioning mechanism: worktree runs (gitrefs boundary commits), in-place
runs (the workspacetrack tracker) and the in-memory one the engine's flow tests use must answer
every operation of ``iterion.engine.versioning.Versioning`` alike: mark, chain, changed paths,
produced scope, restore (dry run, protected paths, other runs), missing objects, undo and its
command, the state reader, the push target (docs/technical/durability.md, "Versioning").

Each test runs once per mechanism on a real repository, through the interface only; where the
mechanisms deliberately differ (a produced scope is refused on a worktree run) the test says so in
one place: ``SCOPES``.
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
from iterion.engine.versioning_memory import MemoryVersioning
from iterion.engine.versioning_types import OTHER_RUN, UndoBank
from iterion.rewind.errors import RewindError
from iterion.rewind.files import RestoreScope, check_scope, restore_files
from tests.conftest import make_checkout

MECHANISMS = ["gitrefs", "workspacetrack", "memory"]
# the scopes each mechanism accepts (the one deliberate difference: git reverts whole trees)
SCOPES = {"gitrefs": [RestoreScope.FULL], "workspacetrack": [RestoreScope.FULL, RestoreScope.PRODUCED],
          "memory": [RestoreScope.FULL, RestoreScope.PRODUCED]}


def L(kind: str, node: str, it: int = 0) -> BoundaryLabel:
    return BoundaryLabel(BoundaryKind(kind), node, it)


@pytest.fixture(params=MECHANISMS)
def mech(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path, Versioning]]:
    ws = make_checkout(tmp_path / "ws")
    v: Versioning
    if request.param == "memory":
        v = MemoryVersioning(ws, "r1")
    else:
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


def disk(ws: Path) -> dict[str, bytes]:
    return {p.relative_to(ws).as_posix(): p.read_bytes() for p in ws.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(ws).parts}


def test_the_mechanism_names_itself_and_its_capabilities(mech: tuple[str, Path, Versioning]) -> None:
    name, _, v = mech
    assert v.mechanism == name
    assert isinstance(v.shares_workspace, bool) and isinstance(v.push_is_bank, bool)
    assert v.size_cap is None or v.size_cap > 0
    assert v.objects_home


def test_undo_puts_back_what_the_restore_changed(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    before = disk(ws)
    report = restore_files(v, L("pre", "b"), RestoreScope.FULL, workspace=ws, protected=[])
    assert report.reverted and report.backup_ref and disk(ws) != before
    out = v.undo(UndoBank(bank=report.backup_ref, anchor=report.anchor,
                          touched=tuple(sorted({*report.restored, *report.removed})),
                          revert_commit=report.revert_commit))
    assert disk(ws) == before
    assert set(out.restored) == {"a.txt", "b.txt", "c/deep.txt"} and set(out.removed) == {"README.md"}


def test_a_restore_that_changes_nothing_says_why_and_needs_no_undo(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    report = restore_files(v, L("pre", "c"), RestoreScope.FULL, workspace=ws, protected=["c/deep.txt"])
    assert not report.reverted and not report.restored and not report.removed
    assert report.undo is None


def test_other_runs_paths_are_left_in_place_by_a_produced_scope(mech: tuple[str, Path, Versioning]) -> None:
    name, ws, v = mech
    if RestoreScope.PRODUCED not in SCOPES[name]:
        assert not v.shares_workspace  # a worktree is the run's own: no other run writes there
        return
    three_nodes(ws, v)
    report = restore_files(v, L("pre", "b"), RestoreScope.PRODUCED, workspace=ws, protected=[],
                           other_runs=[("other-run", frozenset({"b.txt"}))])
    assert (ws / "b.txt").exists() and "b.txt" in report.left_in_place
    assert any(d.path == "b.txt" and d.run_id == "other-run" and d.reason == OTHER_RUN
               for d in report.left_in_place_details)
    assert (ws / "a.txt").read_text() == "a0\n"


def test_a_healthy_store_lacks_no_object(mech: tuple[str, Path, Versioning]) -> None:
    name, ws, v = mech
    three_nodes(ws, v)
    for scope in SCOPES[name]:
        assert v.missing_objects(L("pre", "b"), scope, []) == []


def test_recorded_at_and_recorded_paths(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    assert v.recorded_at(L("pre", "b")) is not None and v.recorded_at(L("pre", "zzz")) is None
    assert v.recorded_paths() == {"a.txt", "b.txt", "README.md", "c/deep.txt"}
    assert v.recorded_paths(after="2000-01-01T00:00:00+00:00") == v.recorded_paths()
    assert v.recorded_paths(after="2999-01-01T00:00:00+00:00") == frozenset()


def test_the_state_reader_diffs_two_recorded_states(mech: tuple[str, Path, Versioning]) -> None:
    _, ws, v = mech
    three_nodes(ws, v)
    by = {str(e.label): e.state for e in v.chain()}
    reader = v.state_reader()
    changes = {c.path: c.kind for c in reader.changes(by["pre:b:0"], by["nodes:b:0"])}
    assert changes == {"a.txt": "modified", "b.txt": "added", "README.md": "deleted"}
    text, truncated = reader.unified_diff(by["pre:a:0"], by["nodes:a:0"])
    assert "+a0" in text and not truncated


def test_the_push_state_is_a_commit_of_the_latest_recorded_state(mech: tuple[str, Path, Versioning]) -> None:
    import pygit2

    _, ws, v = mech
    three_nodes(ws, v)
    (ws / "late.txt").write_text("after the last boundary\n")  # not recorded: not pushed
    state = v.push_state()
    repo = pygit2.Repository(str(v.push_dir()))
    tree = repo.revparse_single(state.commit).peel(pygit2.Tree)
    assert (tree / "a.txt").data == b"a by b\n" and (tree / "c" / "deep.txt").data == b"c\n"
    assert "README.md" not in tree and "late.txt" not in tree
    assert state.tree is None or state.tree == str(tree.id)
