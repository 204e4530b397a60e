"""Produced scope over a REAL chain written by the boundary writer: the spec's four cases."""

from __future__ import annotations

from pathlib import Path

from gitrefs import RunRefs
from gitrefs.boundary import BoundaryLabel

L = BoundaryLabel.parse


def test_file_rewritten_then_put_back_is_in_scope(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:n1:0"))
    (repo / "README.md").write_text("rewritten by n1\n")
    rr.write_boundary(L("nodes:n1:0"))
    rr.write_boundary(L("pre:n2:0"))
    (repo / "README.md").write_text("hello\n")  # n2 puts it back: identical at both ends
    rr.write_boundary(L("nodes:n2:0"))
    scope = rr.produced_scope(L("pre:n1:0"))
    assert scope.paths == {"README.md"}
    assert rr.changed_paths(rr.resolve(L("pre:n1:0")), rr.resolve(L("nodes:n2:0"))) == set()


def test_person_edit_between_pause_and_resume_is_not_in_scope(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:gate:0"))
    (repo / "node-out.txt").write_text("before the gate")
    rr.write_boundary(L("pause:gate:0"))
    (repo / "by-person.txt").write_text("created while paused")
    (repo / "README.md").write_text("edited while paused\n")
    rr.write_boundary(L("resume:gate:0"))
    (repo / "after.txt").write_text("node after resume")
    rr.write_boundary(L("nodes:gate:0"))
    scope = rr.produced_scope(L("pre:gate:0"))
    assert scope.paths == {"node-out.txt", "after.txt"}
    assert scope.idle_paths == {"by-person.txt", "README.md"}


def test_person_edit_during_pause_then_node_change_is_in_scope(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:h:0"))
    rr.write_boundary(L("pause:h:0"))
    (repo / "README.md").write_text("person\n")
    rr.write_boundary(L("resume:h:0"))
    (repo / "README.md").write_text("node\n")
    rr.write_boundary(L("nodes:h:0"))
    assert rr.produced_scope(L("pre:h:0")).paths == {"README.md"}


def test_empty_scope_is_reported_empty(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    (repo / "early.txt").write_text("before the pivot")
    rr.write_boundary(L("nodes:n0:0"))
    rr.write_boundary(L("pre:n1:0"))
    rr.write_boundary(L("nodes:n1:0"))
    scope = rr.produced_scope(L("pre:n1:0"))
    assert scope.empty and scope.paths == frozenset()
    assert len(scope.intervals) == 1


def test_fail_interval_is_excluded_and_node_debris_is_not(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:t:0"))
    (repo / "debris.txt").write_text("half-written")
    rr.write_boundary(L("fail:t:0"))
    (repo / "fix.txt").write_text("triage")
    rr.write_boundary(L("resume:t:0"))
    assert rr.produced_scope(L("pre:t:0")).paths == {"debris.txt"}
