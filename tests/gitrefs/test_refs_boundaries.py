"""Boundary commits: chained on the base, labelled by trailers, `pre` as an alias, listed in order."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from .refs_helpers import git, guarded_state, make_repo

from gitrefs import RunAlreadyStarted, RunRefs, UnknownBoundary, UnknownRun, list_runs
from gitrefs.boundary import BoundaryLabel

L = BoundaryLabel.parse


def test_chain_parents_and_trailers(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    rr = RunRefs.start(repo, "r1")
    (repo / "a.txt").write_text("a")
    first = rr.write_boundary(L("nodes:build:0"))
    (repo / "b.txt").write_text("b")
    second = rr.write_boundary(L("pause:ask:2"))
    assert git(repo, "rev-parse", f"{first.commit}^").strip() == base
    assert git(repo, "rev-parse", f"{second.commit}^").strip() == first.commit
    assert git(repo, "rev-parse", "refs/iterion/runs/r1/head").strip() == second.commit
    assert git(repo, "rev-parse", "refs/iterion/runs/r1/pause/ask/2").strip() == second.commit
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", second.commit)
    assert trailers.split() == ["Iterion-Run:", "r1", "Iterion-Node:", "ask", "Iterion-Iteration:", "2",
                                "Iterion-Kind:", "pause"]
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", second.commit).strip() == \
        "iterion <iterion@localhost>|iterion <iterion@localhost>"


def test_pre_is_an_alias_and_writes_no_object(repo: Path) -> None:
    rr = RunRefs.start(repo, "r1")
    first_pre = rr.write_boundary(L("pre:a:0"))
    assert first_pre.commit == git(repo, "rev-parse", "HEAD").strip()  # the base, before any boundary
    (repo / "x").write_text("x")
    done = rr.write_boundary(L("nodes:a:0"))
    objects_before = git(repo, "count-objects", "-v")
    (repo / "y").write_text("y")  # a pre boundary does not look at the tree
    pre = rr.write_boundary(L("pre:b:0"))
    assert pre.commit == done.commit and pre.tree == done.tree
    assert git(repo, "count-objects", "-v") == objects_before
    assert git(repo, "rev-parse", "refs/iterion/runs/r1/pre/b/0").strip() == done.commit
    assert git(repo, "rev-parse", "refs/iterion/runs/r1/head").strip() == done.commit


def test_unchanged_tree_still_gets_its_ref(repo: Path) -> None:
    rr = RunRefs.start(repo, "r1")
    a = rr.write_boundary(L("nodes:a:0"))
    b = rr.write_boundary(L("nodes:b:0"))
    assert a.tree == b.tree and a.commit != b.commit
    assert git(repo, "rev-parse", "refs/iterion/runs/r1/nodes/b/0").strip() == b.commit


def test_listing_is_in_chain_order(repo: Path) -> None:
    rr = RunRefs.start(repo, "r1")
    sequence = ["pre:plan:0", "nodes:plan:0", "pre:build:0", "pause:build:0", "resume:build:0",
                "nodes:build:0",
                "pre:build:1", "fail:build:1", "resume:build:1", "nodes:build:1", "pre:zeta:0", "pre:alpha:0"]
    for i, text in enumerate(sequence):
        (repo / f"f{i}").write_text(str(i))
        rr.write_boundary(L(text))
    assert [str(b.label) for b in rr.boundaries()] == sequence[:-2] + ["pre:alpha:0", "pre:zeta:0"]
    entries = rr.chain_entries()
    assert [str(e.label) for e in entries][:3] == sequence[:3]
    assert entries[2].state == entries[1].state  # pre:build:0 aliases nodes:plan:0


def test_boundaries_leave_index_head_branches_untouched(repo: Path) -> None:
    (repo / "README.md").write_text("dirty\n")
    git(repo, "add", "README.md")
    (repo / "untracked.txt").write_text("u")
    before = guarded_state(repo)
    rr = RunRefs.start(repo, "r1")
    for text in ["pre:a:0", "nodes:a:0", "pause:a:1", "resume:a:1"]:
        rr.write_boundary(L(text))
    assert guarded_state(repo) == before


def test_unborn_head_run_chains_on_an_empty_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commit=False)
    rr = RunRefs.start(repo, "r1")
    assert rr.record().base is None
    pre = rr.write_boundary(L("pre:a:0"))
    (repo / "f.txt").write_text("f")
    done = rr.write_boundary(L("nodes:a:0"))
    assert rr.changed_paths(pre.commit, done.commit) == {"f.txt"}
    assert git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False) == ""  # still unborn


def test_start_twice_unknown_run_unknown_label(repo: Path) -> None:
    RunRefs.start(repo, "r1")
    with pytest.raises(RunAlreadyStarted):
        RunRefs.start(repo, "r1")
    with pytest.raises(UnknownRun, match="no run 'r2'"):
        RunRefs(repo, "r2").write_boundary(L("nodes:a:0"))
    with pytest.raises(UnknownBoundary):
        RunRefs(repo, "r1").resolve(L("nodes:never:0"))
    assert list_runs(repo) == ["r1"]


def test_explicit_base_and_changed_paths(repo: Path) -> None:
    (repo / "old.txt").write_text("o")
    git(repo, "add", "old.txt")
    git(repo, "commit", "-q", "-m", "second")
    rr = RunRefs.start(repo, "r1", base="HEAD~1")
    assert rr.base_commit() == git(repo, "rev-parse", "HEAD~1").strip()
    (repo / "new dir").mkdir()
    (repo / "new dir" / "n.txt").write_text("n")
    rec = rr.write_boundary(L("nodes:a:0"))
    # The first boundary chains on the recorded base, whatever HEAD is now.
    assert rr.changed_paths(rr.base_commit(), rec.commit) == {"old.txt", "new dir/n.txt"}
    assert rr.changed_paths(rec.commit, rec.tree) == set()
    assert isinstance(rr.repo[rec.commit], pygit2.Commit)


def test_concurrent_writers_never_drop_a_boundary(repo: Path) -> None:
    import threading
    RunRefs.start(repo, "r1")
    errors: list[BaseException] = []

    def branch(b: int) -> None:
        try:
            rr = RunRefs(repo, "r1")
            for i in range(4):
                (repo / f"b{b}-{i}.txt").write_text("x")
                rr.write_boundary(L(f"pre:branch{b}:{i}"))
                rr.write_boundary(L(f"nodes:branch{b}:{i}"))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=branch, args=(b,)) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = [str(b.label) for b in RunRefs(repo, "r1").boundaries() if b.label.kind.value == "nodes"]
    assert sorted(listed) == sorted(f"nodes:branch{b}:{i}" for b in range(4) for i in range(4))


def test_unknown_base_revision(repo: Path) -> None:
    from gitrefs import UnknownRevision
    with pytest.raises(UnknownRevision, match="names no commit"):
        RunRefs.start(repo, "r1", base="no-such-branch")
    assert not RunRefs(repo, "r1").started
