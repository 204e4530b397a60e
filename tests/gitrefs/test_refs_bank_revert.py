"""Bank and revert on real repositories; nothing the run ever had becomes unreachable."""

from __future__ import annotations

import os
import random
from pathlib import Path

from .refs_helpers import all_reachable_trees, git, guarded_state, reference_tree, tree_paths

from gitrefs import RunRefs
from gitrefs.boundary import BoundaryLabel

L = BoundaryLabel.parse


def test_bank_captures_uncommitted_and_untracked_without_touching_the_index(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    (repo / "README.md").write_text("uncommitted\n")
    (repo / "untracked.txt").write_text("u")
    (repo / ".gitignore").write_text("*.cache\n")
    (repo / "x.cache").write_text("ignored")
    before = guarded_state(repo)
    first = rr.bank("build")
    second = rr.bank("build")
    assert guarded_state(repo) == before
    assert (first.seq, second.seq) == (1, 2)
    assert first.ref == "refs/iterion/runs/r/rewind/build/1"
    assert git(repo, "rev-parse", first.ref).strip() == first.commit
    assert first.tree == reference_tree(repo, repo.parent / "scratch")
    assert git(repo, "show", f"{first.commit}:README.md") == "uncommitted"
    assert "x.cache" not in tree_paths(repo, first.tree)
    assert [b.ref for b in rr.banks()] == [first.ref, second.ref]


def test_revert_commits_on_head_and_restores_tree_and_index(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    user_commit = git(repo, "rev-parse", "HEAD").strip()
    (repo / "kept.txt").write_text("from before the pivot")
    os.symlink("kept.txt", repo / "link")
    (repo / ".gitignore").write_text("*.log\n")
    rr.write_boundary(L("pre:gen:0"))  # alias of the base: kept.txt is NOT in it
    pre = rr.write_boundary(L("nodes:prep:0"))
    rr.write_boundary(L("pre:gen:0"))  # replay-style overwrite: latest occurrence counts
    (repo / "kept.txt").write_text("rewritten by gen")
    (repo / "gen").mkdir()
    (repo / "gen" / "out 1.txt").write_text("generated")
    os.chmod(repo / "gen" / "out 1.txt", 0o755)
    (repo / "link").unlink()
    (repo / "link").write_text("now a file")
    (repo / "README.md").unlink()
    (repo / "keep.log").write_text("ignored: never touched")
    rr.write_boundary(L("nodes:gen:0"))
    (repo / "after-last-boundary.txt").write_text("uncommitted work at rewind time")

    res = rr.revert_to(L("pre:gen:0"))

    assert res.target_commit == pre.commit
    assert git(repo, "rev-parse", "HEAD").strip() == res.revert_commit
    assert git(repo, "rev-parse", "HEAD^").strip() == user_commit  # the run's own history stays in git log
    assert git(repo, "rev-parse", "HEAD^{tree}").strip() == pre.tree
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""  # tree and index match it
    assert (repo / "kept.txt").read_text() == "from before the pivot"
    assert os.readlink(repo / "link") == "kept.txt"
    assert (repo / "README.md").read_text() == "hello\n"
    assert not (repo / "gen" / "out 1.txt").exists()
    assert (repo / "gen").is_dir() and not any((repo / "gen").iterdir())  # emptied directories stay
    assert not (repo / "after-last-boundary.txt").exists()
    assert (repo / "keep.log").read_text() == "ignored: never touched"
    assert set(res.removed) == {"gen/out 1.txt", "after-last-boundary.txt"}
    assert {"kept.txt", "link", "README.md"} <= set(res.restored)
    # The state at the instant of the rewind is banked, uncommitted work included.
    assert git(repo, "show", f"{res.bank.ref}:after-last-boundary.txt") == "uncommitted work at rewind time"
    assert res.bank.ref == "refs/iterion/runs/r/rewind/gen/1"


def test_revert_on_a_linked_worktree_moves_only_its_branch(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "run", str(wt))
    main_before = git(repo, "rev-parse", "main").strip()
    rr = RunRefs.start(wt, "r")
    rr.write_boundary(L("pre:a:0"))
    (wt / "a.txt").write_text("a")
    rr.write_boundary(L("nodes:a:0"))
    res = rr.revert_to(L("pre:a:0"))
    assert git(repo, "rev-parse", "run").strip() == res.revert_commit
    assert git(repo, "rev-parse", "main").strip() == main_before
    assert not (wt / "a.txt").exists()
    assert git(wt, "status", "--porcelain") == ""


def test_nothing_becomes_unreachable_after_random_sequences(repo: Path) -> None:
    rng = random.Random(1234)  # fixed seed: reproducible
    rr = RunRefs.start(repo, "r")
    seen_trees: set[str] = set()
    labels: list[BoundaryLabel] = []
    for step in range(30):
        for _ in range(rng.randint(0, 3)):
            name = f"f{rng.randint(0, 5)}.txt"
            if rng.random() < 0.3 and (repo / name).exists():
                (repo / name).unlink()
            else:
                (repo / name).write_text(f"{step}-{rng.random()}")
        seen_trees.add(rr.snapshot())
        op = rng.random()
        node = f"n{step}"
        if op < 0.5:
            labels.append(L(f"pre:{node}:0"))
            rr.write_boundary(labels[-1])
            rr.write_boundary(L(f"nodes:{node}:0"))
        elif op < 0.7:
            rr.bank(node)
        elif labels:
            res = rr.revert_to(rng.choice(labels))
            seen_trees.add(res.bank.tree)
            seen_trees.add(rr.snapshot())
    assert seen_trees <= all_reachable_trees(repo)


def test_revert_reports_a_moved_submodule_as_skipped(repo: Path, tmp_path: Path) -> None:
    sub_src = tmp_path / "subsrc"
    sub_src.mkdir()
    git(sub_src, "init", "-q", "-b", "main")
    (sub_src / "s.txt").write_text("s")
    git(sub_src, "add", "s.txt")
    git(sub_src, "commit", "-q", "-m", "sub")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_src), "sub")
    git(repo, "commit", "-q", "-m", "submodule")
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:n:0"))
    (repo / "sub" / "s.txt").write_text("moved")
    git(repo / "sub", "commit", "-q", "-am", "move")
    (repo / "plain.txt").write_text("p")
    rr.write_boundary(L("nodes:n:0"))
    res = rr.revert_to(L("pre:n:0"))
    assert res.skipped == ("sub",) and res.removed == ("plain.txt",)
    assert (repo / "sub" / "s.txt").read_text() == "moved"  # never descended into


def test_revert_on_an_unborn_head(tmp_path: Path) -> None:
    from .refs_helpers import make_repo
    repo = make_repo(tmp_path / "repo", commit=False)
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:a:0"))
    (repo / "made.txt").write_text("m")
    rr.write_boundary(L("nodes:a:0"))
    res = rr.revert_to(L("pre:a:0"))
    assert res.removed == ("made.txt",) and not (repo / "made.txt").exists()
    assert git(repo, "rev-parse", "HEAD").strip() == res.revert_commit
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(repo, "show", f"{res.bank.ref}:made.txt") == "m"


def test_revert_restores_exec_bits_and_file_to_dir_changes(repo: Path) -> None:
    (repo / "tool.sh").write_text("#!/bin/sh\n")
    os.chmod(repo / "tool.sh", 0o755)
    (repo / "thing").write_text("a file before the node")
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("nodes:setup:0"))
    rr.write_boundary(L("pre:n:0"))
    (repo / "tool.sh").write_text("rewritten\n")
    os.chmod(repo / "tool.sh", 0o644)
    (repo / "thing").unlink()
    (repo / "thing").mkdir()
    (repo / "thing" / "inside.txt").write_text("the node made it a directory")
    rr.write_boundary(L("nodes:n:0"))
    res = rr.revert_to(L("pre:n:0"))
    assert os.access(repo / "tool.sh", os.X_OK) and (repo / "tool.sh").read_text() == "#!/bin/sh\n"
    assert (repo / "thing").is_file() and (repo / "thing").read_text() == "a file before the node"
    assert res.removed == ("thing/inside.txt",) and set(res.restored) == {"tool.sh", "thing"}
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_replay_after_a_revert_starts_from_the_reverted_tree(repo: Path) -> None:
    rr = RunRefs.start(repo, "r")
    rr.write_boundary(L("pre:gen:0"))
    (repo / "out.txt").write_text("first production")
    rr.write_boundary(L("nodes:gen:0"))
    first = rr.revert_to(L("pre:gen:0"))
    assert rr.chain_head() == first.chain_commit
    # The replay: its `pre` must alias the reverted state, not the dropped production.
    pre_again = rr.write_boundary(L("pre:gen:0"))
    assert pre_again.tree == git(repo, "rev-parse", "HEAD^{tree}").strip()
    (repo / "out.txt").write_text("second production")
    rr.write_boundary(L("nodes:gen:0"))
    assert rr.produced_scope(L("pre:gen:0")).paths == {"out.txt"}
    rr.revert_to(L("pre:gen:0"))
    assert not (repo / "out.txt").exists()
    labels = [str(b.label) for b in rr.boundaries()]
    assert labels == ["nodes:gen:0", "pre:gen:0", "nodes:gen:0"]  # revert steps are not boundaries
