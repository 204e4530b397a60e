"""Tree shapes a rewind used to drop: a regular file named `.git` in a subfolder, empty
directories a node removed (in place)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..conftest import git
from .coverage_harness import cli, run_and_rewind, setup


def test_a_dot_git_file_in_a_subfolder_comes_back(repo: Path, tmp_path: Path) -> None:
    (repo / "vendor" / "lib").mkdir(parents=True)
    (repo / "vendor" / "lib" / ".git").write_bytes(b"gitdir: ../../.git/modules/lib\n")
    (repo / "vendor" / "lib" / "code.c").write_bytes(b"int x;\n")
    (repo / "docs").mkdir()
    (repo / "docs" / ".git").write_bytes(b"not a gitfile at all\n")
    setup(repo, tmp_path, """
        os.unlink("vendor/lib/.git")
        open("docs/.git", "wb").write(b"rewritten by the node\\n")
        os.makedirs("newdir", exist_ok=True)
        open("newdir/.git", "wb").write(b"created by the node\\n")
    """)
    index_before = (repo / ".git" / "index").read_bytes()  # after the bot's own commit
    r = run_and_rewind(repo, tmp_path / "store")
    assert (repo / "vendor" / "lib" / ".git").read_bytes() == b"gitdir: ../../.git/modules/lib\n"
    assert (repo / "docs" / ".git").read_bytes() == b"not a gitfile at all\n"
    assert not (repo / "newdir" / ".git").exists()
    assert set(r.files["restored"]) == {"vendor/lib/.git", "docs/.git"}
    assert r.files["removed"] == ["newdir/.git"] and r.files["skipped"] == []
    # the repository's own .git is never touched: index byte-identical, HEAD where it was
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert git(repo, "log", "-1", "--format=%s").strip() == "the bot"  # no commit after the bot's own


def test_empty_directories_a_node_removed_are_recreated(repo: Path, tmp_path: Path) -> None:
    (repo / "out" / "cache").mkdir(parents=True)
    (repo / "spool").mkdir()
    os.chmod(repo / "spool", 0o750)
    (repo / "keep").mkdir()
    (repo / "keep" / "f.txt").write_bytes(b"f\n")
    setup(repo, tmp_path, """
        os.rmdir("out/cache")
        os.rmdir("out")
        os.rmdir("spool")
        os.unlink("keep/f.txt")  # keep/ is now empty: it must not be reported removed
        os.mkdir("made-by-node")
    """)
    r = run_and_rewind(repo, tmp_path / "store")
    assert (repo / "out" / "cache").is_dir() and os.listdir(repo / "out" / "cache") == []
    assert (repo / "spool").is_dir() and stat.S_IMODE((repo / "spool").stat().st_mode) == 0o750
    assert (repo / "keep" / "f.txt").read_bytes() == b"f\n"
    assert not (repo / "made-by-node").exists()
    assert set(r.files["restored"]) == {"out/cache", "spool", "keep/f.txt"}
    assert r.files["removed"] == ["made-by-node"] and r.files["skipped"] == []
    # the replay's `rmdir` meets the directories again: resume runs the node past them
    code, out, err = cli(repo, tmp_path / "store", "resume", "--run-id", r.run_id, "--json")
    assert "FileNotFoundError" not in err + out, (out, err)
    # the script ran to its end (its last step made the directory), then failed on `false` as before
    assert (repo / "made-by-node").is_dir() and not (repo / "spool").exists(), (code, out, err)
