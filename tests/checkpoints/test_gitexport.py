"""An in-place snapshot exported as a commit: what its tree holds, and what it never touches."""

from __future__ import annotations

import os
from pathlib import Path

from gitrefs.boundary import BoundaryKind, BoundaryLabel
from workspacetrack.gitexport import export_snapshot
from workspacetrack.tracker import Tracker

from .conftest import git, index_digest, make_checkout


def _tree(repo: Path, commit: str) -> dict[str, str]:
    """path -> "mode type" of every entry of ``commit``'s tree."""
    out = git(repo, "ls-tree", "-r", "--full-tree", commit)
    rows = {}
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, _oid = meta.split()
        rows[path] = f"{mode} {kind}"
    return rows


def test_export_holds_the_workspace_and_what_the_capture_could_not_see(tmp_path: Path) -> None:
    repo = make_checkout(tmp_path / "repo")
    (repo / "outside.txt").write_text("outside\n")
    ws = repo / "proj"
    ws.mkdir()
    (ws / "kept.log").write_text("tracked although ignored\n")
    (ws / "gone.txt").write_text("deleted by the run\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (ws / ".gitignore").write_text("*.log\n")
    # the run's work: a new file, an executable, a symlink, an empty dir, a deletion
    (ws / "new.txt").write_text("new\n")
    (ws / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(ws / "run.sh", 0o755)
    os.symlink("new.txt", ws / "link")
    (ws / "empty").mkdir()
    (ws / "gone.txt").unlink()
    (ws / "nested").mkdir()
    (ws / "nested" / ".git").write_text("gitdir: /nowhere\n")  # content to the tracker, not to git
    (ws / "nested" / "f.txt").write_text("f\n")
    index0 = index_digest(repo)
    head0 = git(repo, "rev-parse", "HEAD").strip()

    tracker = Tracker(tmp_path / "track", ws, "r1")
    tracker.capture(BoundaryLabel(BoundaryKind.PAUSE, "gate", 0))
    exported = export_snapshot(tracker)

    tree = _tree(repo, exported.commit)
    assert tree["outside.txt"] == "100644 blob"          # outside the workspace: HEAD's
    assert tree["proj/kept.log"] == "100644 blob"        # tracked + ignored: HEAD's version stands
    assert "proj/gone.txt" not in tree                   # the run deleted it
    assert tree["proj/new.txt"] == "100644 blob"
    assert tree["proj/run.sh"] == "100755 blob"
    assert tree["proj/link"] == "120000 blob"
    assert git(repo, "cat-file", "-p", f"{exported.commit}:proj/link") == "new.txt"
    assert "proj/nested/f.txt" in tree and "proj/nested/.git" not in tree
    assert exported.skipped == ["empty/", "nested/.git"] and "proj/empty" not in tree  # workspace-relative
    assert exported.parent == head0 and git(repo, "rev-parse", f"{exported.commit}^").strip() == head0
    trailers = git(repo, "log", "-1", "--format=%B", exported.commit)
    assert "Iterion-Run: r1" in trailers and "Iterion-Label: pause:gate:0" in trailers
    # nothing of the user's moved: index, HEAD, refs
    assert index_digest(repo) == index0
    assert git(repo, "rev-parse", "HEAD").strip() == head0
    assert git(repo, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    assert git(repo, "status", "--porcelain", "--", "proj/kept.log") == ""

    # a second export of the same snapshot reuses the cached blobs and gives the same tree
    again = export_snapshot(tracker)
    assert again.tree == exported.tree
    assert (tmp_path / "track" / "gitblobs.json").is_file()


def test_export_from_an_unborn_head_has_no_parent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "a.txt").write_text("a\n")
    tracker = Tracker(tmp_path / "track", ws, "r2")
    tracker.capture(BoundaryLabel(BoundaryKind.NODES, "n", 0))
    exported = export_snapshot(tracker)
    assert exported.parent is None
    assert _tree(ws, exported.commit) == {"a.txt": "100644 blob"}
    assert not (ws / ".git" / "index").exists()
