"""The bullets that apply to worktree runs (gitrefs restores them): names that are not UTF-8,
of 250 bytes, with a backslash; files replaced by symlinks; a 50 MB binary."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..conftest import git
from .coverage_harness import run_and_rewind, setup

LATIN1 = b"caf\xe9.txt"
LONG = "n" * 246 + ".txt"


def test_worktree_run_restores_awkward_names_links_and_a_large_binary(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_bytes(b"outside\n")
    root = os.fsencode(str(repo))
    with open(root + b"/" + LATIN1, "wb") as f:
        f.write(b"latin-1 name\n")
    (repo / "a\\b.txt").write_bytes(b"backslash\n")
    (repo / LONG).write_bytes(b"long name\n")
    (repo / "conf.yml").write_bytes(b"user: config\n")
    (repo / "lib").mkdir()
    (repo / "lib" / "x.py").write_bytes(b"x = 1\n")
    big = os.urandom(50 * 2**20)
    (repo / "model.bin").write_bytes(big)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the user's files")
    setup(repo, tmp_path, f"""
        os.unlink({LATIN1!r})
        open(b"new-\\xff.bin", "wb").write(b"node output")
        open("a\\\\b.txt", "wb").write(b"changed")
        open({LONG!r}, "wb").write(b"changed")
        os.unlink("conf.yml")
        os.symlink({str(outside / "target.txt")!r}, "conf.yml")
        os.unlink("lib/x.py")
        os.rmdir("lib")
        os.symlink({str(outside)!r}, "lib")  # a directory replaced by a link out of the worktree
        with open("model.bin", "r+b") as f:
            f.seek(2**20)
            f.write(b"corrupt" * 100)
    """, worktree=True)
    r = run_and_rewind(repo, tmp_path / "store", text_too=False)
    ws = r.workspace
    assert ws != repo and r.files["mechanism"] == "gitrefs"
    wroot = os.fsencode(str(ws))
    with open(wroot + b"/" + LATIN1, "rb") as f:
        assert f.read() == b"latin-1 name\n"
    assert not os.path.lexists(wroot + b"/new-\xff.bin")
    assert (ws / "a\\b.txt").read_bytes() == b"backslash\n"
    assert (ws / LONG).read_bytes() == b"long name\n"
    assert not (ws / "conf.yml").is_symlink() and (ws / "conf.yml").read_bytes() == b"user: config\n"
    assert not (ws / "lib").is_symlink() and (ws / "lib" / "x.py").read_bytes() == b"x = 1\n"
    assert hashlib.sha256((ws / "model.bin").read_bytes()).digest() == hashlib.sha256(big).digest()
    assert sorted(os.listdir(outside)) == ["target.txt"]  # nothing written outside
    assert (outside / "target.txt").read_bytes() == b"outside\n"
    assert {"caf\\xe9.txt", "a\\b.txt", LONG, "conf.yml", "lib/x.py", "model.bin"} <= set(r.files["restored"])
    assert "new-\\xff.bin" in r.files["removed"] and r.files["skipped"] == []
    assert r.files["raw_paths"] == {"caf\\xe9.txt": LATIN1.hex(), "new-\\xff.bin": b"new-\xff.bin".hex()}
    assert r.event["files_raw_paths"] == r.files["raw_paths"]
