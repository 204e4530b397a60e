"""Snapshot == `git add -A && git write-tree` on a copy of the index, for many tree shapes.

Each shape builds a real repository; the snapshot's tree id must EQUAL git's own, and the
user's index, HEAD, branches and stash must be byte-identical afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from .refs_helpers import git, gitdir_of, guarded_state, make_repo, reference_tree, tree_paths

from gitrefs import RunRefs
from gitrefs.snapshot import snapshot_workspace
from gitrefs.workspace import open_workspace


def shape_ignored_dirs(repo: Path, tmp: Path) -> None:
    (repo / ".gitignore").write_text("build/\n*.log\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("obj")
    (repo / "run.log").write_text("log")
    (repo / "src").mkdir()
    (repo / "src" / "main.c").write_text("int main;")
    (repo / "src" / "debug.log").write_text("log")


def shape_nested_gitignore_negation(repo: Path, tmp: Path) -> None:
    (repo / "sub" / "deeper").mkdir(parents=True)
    (repo / "sub" / ".gitignore").write_text("*.tmp\n!keep.tmp\n")
    (repo / "sub" / "a.tmp").write_text("a")
    (repo / "sub" / "keep.tmp").write_text("k")
    (repo / "sub" / "deeper" / "b.tmp").write_text("b")
    (repo / "sub" / "deeper" / "keep.tmp").write_text("k2")
    (repo / "top.tmp").write_text("not ignored at top level")


def shape_info_exclude(repo: Path, tmp: Path) -> None:
    exclude = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("secret.txt\n")
    (repo / "secret.txt").write_text("s")
    (repo / "public.txt").write_text("p")


def shape_core_excludesfile(repo: Path, tmp: Path) -> None:
    excludes = tmp / "my excludes"
    excludes.write_text("*.bak\n")
    git(repo, "config", "core.excludesFile", str(excludes))
    (repo / "x.bak").write_text("b")
    (repo / "x.txt").write_text("t")


def shape_exec_bits(repo: Path, tmp: Path) -> None:
    (repo / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(repo / "run.sh", 0o755)
    os.chmod(repo / "README.md", 0o755)  # tracked file gains +x


def shape_symlinks(repo: Path, tmp: Path) -> None:
    (repo / "d").mkdir()
    (repo / "d" / "f").write_text("f")
    os.symlink("README.md", repo / "link")
    os.symlink("does-not-exist", repo / "dangling")
    os.symlink("d", repo / "dirlink")


def shape_deleted_and_modified(repo: Path, tmp: Path) -> None:
    (repo / "gone.txt").write_text("g")
    (repo / "staged.txt").write_text("v1")
    git(repo, "add", "gone.txt", "staged.txt")
    git(repo, "commit", "-q", "-m", "more")
    (repo / "gone.txt").unlink()
    (repo / "staged.txt").write_text("v2")
    git(repo, "add", "staged.txt")  # index holds v2, the tree on disk moves on to v3
    (repo / "staged.txt").write_text("v3")
    (repo / "README.md").write_text("edited\n")


def shape_untracked_nested(repo: Path, tmp: Path) -> None:
    (repo / "a" / "b" / "c").mkdir(parents=True)
    (repo / "a" / "b" / "c" / "new.txt").write_text("n")
    (repo / "a" / "top.txt").write_text("t")
    (repo / "empty-dir").mkdir()


def shape_submodule(repo: Path, tmp: Path) -> None:
    sub_src = make_repo(tmp / "subsrc")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub_src), "mods/sub")
    git(repo, "commit", "-q", "-m", "add submodule")
    sub = repo / "mods" / "sub"
    (sub / "inner.txt").write_text("never descended")  # untracked inside the submodule
    (sub / "README.md").write_text("changed in the submodule\n")
    git(sub, "commit", "-q", "-am", "move the submodule")


def shape_embedded_repo(repo: Path, tmp: Path) -> None:
    make_repo(repo / "vendor" / "lib")


def shape_spaces_unicode(repo: Path, tmp: Path) -> None:
    (repo / "dir with space").mkdir()
    (repo / "dir with space" / "fïlé ü.txt").write_text("u")
    (repo / "日本語.md").write_text("j")
    (repo / "tab\there").write_text("t")
    (repo / "quote\"name").write_text("q")


def shape_gitattributes_and_crlf(repo: Path, tmp: Path) -> None:
    (repo / ".gitattributes").write_text("*.txt text eol=lf\n")
    (repo / "win.txt").write_bytes(b"a\r\nb\r\n")


SHAPES: dict[str, Callable[[Path, Path], None]] = {
    f.__name__.removeprefix("shape_"): f for f in [
        shape_ignored_dirs, shape_nested_gitignore_negation, shape_info_exclude, shape_core_excludesfile,
        shape_exec_bits, shape_symlinks, shape_deleted_and_modified, shape_untracked_nested,
        shape_submodule, shape_embedded_repo, shape_spaces_unicode, shape_gitattributes_and_crlf]
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_snapshot_equals_git_add_all(tmp_path: Path, shape: str) -> None:
    repo = make_repo(tmp_path / "repo")
    SHAPES[shape](repo, tmp_path)
    before = guarded_state(repo)
    ours = RunRefs.start(repo, "r1").snapshot()
    after = guarded_state(repo)
    assert after == before
    assert ours == reference_tree(repo, tmp_path / "scratch")


def test_every_shape_at_once_through_a_boundary(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for i, fn in enumerate(SHAPES.values()):
        (tmp_path / str(i)).mkdir()
        fn(repo, tmp_path / str(i))
    before = guarded_state(repo)
    rr = RunRefs.start(repo, "all")
    from gitrefs.boundary import BoundaryLabel
    rec = rr.write_boundary(BoundaryLabel.parse("nodes:n:0"))
    assert guarded_state(repo) == before
    assert rec.tree == reference_tree(repo, tmp_path / "scratch")


def test_ignored_files_are_never_captured(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    shape_ignored_dirs(repo, tmp_path)
    shape_info_exclude(repo, tmp_path)
    shape_core_excludesfile(repo, tmp_path)
    shape_nested_gitignore_negation(repo, tmp_path)
    paths = tree_paths(repo, snapshot_workspace(open_workspace(repo)))
    for ignored in ["build/out.o", "run.log", "src/debug.log", "secret.txt", "x.bak", "sub/a.tmp",
                    "sub/deeper/b.tmp"]:
        assert ignored not in paths
    for kept in ["src/main.c", "public.txt", "x.txt", "sub/keep.tmp", "sub/deeper/keep.tmp", "top.tmp"]:
        assert kept in paths


def test_submodule_is_a_gitlink_never_descended(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    shape_submodule(repo, tmp_path)
    tree = snapshot_workspace(open_workspace(repo))
    entry = git(repo, "ls-tree", tree, "mods/sub")
    assert entry.startswith("160000 commit ")
    assert entry.split()[2] == git(repo / "mods" / "sub", "rev-parse", "HEAD")
    assert not any(p.startswith("mods/sub/") for p in tree_paths(repo, tree))


def test_unborn_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commit=False)
    (repo / ".gitignore").write_text("*.o\n")
    (repo / "a.o").write_text("o")
    (repo / "a.c").write_text("c")
    before = guarded_state(repo)
    rr = RunRefs.start(repo, "r1")
    ours = rr.snapshot()
    assert guarded_state(repo) == before
    assert not (Path(git(repo, "rev-parse", "--absolute-git-dir")) / "index").exists()
    assert ours == reference_tree(repo, tmp_path / "scratch")
    assert tree_paths(repo, ours) == {".gitignore", "a.c"}


def test_linked_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = tmp_path / "wt dir"
    git(repo, "worktree", "add", "-q", "-b", "run-branch", str(wt))
    (wt / "README.md").write_text("worktree edit\n")
    (wt / "new file.txt").write_text("n")
    (repo / "main-only.txt").write_text("must not leak into the worktree's snapshot")
    main_before, wt_before = guarded_state(repo), guarded_state(wt)
    rr = RunRefs.start(wt, "wt-run")
    ours = rr.snapshot()
    assert guarded_state(repo) == main_before and guarded_state(wt) == wt_before
    assert ours == reference_tree(wt, tmp_path / "scratch")
    assert "main-only.txt" not in tree_paths(wt, ours)
    # The run's private index lives in the worktree's own git dir (stat data is per worktree).
    private = rr.ws.private_dir("wt-run")
    assert private.is_relative_to(rr.ws.gitdir) and (private / "index").is_file()
    assert rr.ws.gitdir != gitdir_of(repo) and not (gitdir_of(repo) / "iterion" / "runs" / "wt-run" / "index").exists()


def test_snapshot_after_user_stash_and_staging_changes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("stashed\n")
    git(repo, "stash", "-q")
    (repo / "README.md").write_text("staged\n")
    git(repo, "add", "README.md")
    (repo / "u.txt").write_text("u")
    before = guarded_state(repo)
    assert "stash@{0}" in before["stash"]
    ours = snapshot_workspace(open_workspace(repo))
    assert guarded_state(repo) == before
    assert ours == reference_tree(repo, tmp_path / "scratch")
    assert git(repo, "status", "--porcelain") == "M  README.md\n?? u.txt".strip()
