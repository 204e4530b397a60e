"""git's index read by ``_fastwalk.index_entries`` (C) and by its Python twin in
workspacetrack/gitsource.py: the same rows, attributes and cache-tree root for every index
shape git writes (versions 2, 3 and 4, a sub-directory prefix, intent-to-add, skip-worktree,
assume-unchanged, a conflict, symlinks and gitlinks, undecodable names, racy entries, long
names), and no crash, only None or rows, on damaged bytes."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from .track_helpers import merge_conflict, write
from workspacetrack import gitsource
from workspacetrack.gitsource import IndexView, parse_index

from ..conftest import git


def _both(data: bytes, prefix: bytes, racy_ns: int, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    out = []
    for fast in (gitsource._fast, None):
        with monkeypatch.context() as m:
            m.setattr(gitsource, "_fast", fast)
            attrs: list[bytes] = []
            root: list[str] = []
            rows = parse_index(data, prefix, racy_ns, attrs, root)
            out.append((rows, attrs, root))
    # and the C table the walk looks paths up in holds the very same rows
    view = gitsource.parse_index_view(data, prefix, racy_ns)
    assert view is None or view.table is not None
    assert (view.all_rows() if view is not None else None) == out[1][0]
    return out[0], out[1]


LONG = "/".join(["a" * 200] * 20) + "/long.txt"


def _shaped_repo(repo: Path) -> None:
    past = time.time() - 3600
    for i in range(30):
        write(repo, f"d{i % 3}/f{i}.txt", f"file {i}\n")
    write(repo, ".gitattributes", "*.bin binary\n")
    write(repo, "sub/.gitattributes", "*.txt -text\n")
    write(repo, "x.gitattributes", "not one\n")
    write(repo, "tool.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("d0/f0.txt", repo / "link")
    fd = os.open(os.fsencode(str(repo)) + b"/bad-\xff.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"undecodable\n")
    os.close(fd)
    for dp, _dn, fn in os.walk(repo):
        if ".git" in dp.split(os.sep):
            continue
        for f in fn:
            os.utime(os.path.join(dp, f), (past, past), follow_symlinks=False)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "shapes")
    # a name over 0xFFF bytes (the NUL-ended form): no file can have it, the index can
    blob = git(repo, "hash-object", "-w", "d0/f0.txt").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{LONG}")
    nested = repo / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    write(nested, "n.txt", "n\n")
    git(nested, "add", "-A")
    git(nested, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "n")
    git(repo, "add", "nested")  # a gitlink
    write(repo, "new-intent.txt", "intent\n")
    git(repo, "add", "-N", "new-intent.txt")
    git(repo, "update-index", "--skip-worktree", "d1/f1.txt")
    git(repo, "update-index", "--assume-unchanged", "d2/f2.txt")
    write(repo, "fresh.txt", "written just now: racy\n")
    git(repo, "add", "fresh.txt")


@pytest.mark.parametrize("version", [2, 3, 4])
def test_every_index_shape_reads_the_same_both_ways(repo: Path, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _shaped_repo(repo)
    git(repo, "update-index", "--index-version", str(version))
    path = repo / ".git" / "index"
    data = path.read_bytes()
    racy = os.stat(repo / "fresh.txt").st_mtime_ns  # as if the index were written with it: racy
    for prefix in (b"", b"d0/", b"sub/", b"nope/"):
        c, py = _both(data, prefix, racy, monkeypatch)
        assert c == py, (version, prefix)
    (rows, attrs, _root), _ = _both(data, b"", racy, monkeypatch)
    assert rows is not None
    assert "d0/f3.txt" in rows and "tool.sh" in rows and os.fsdecode(b"bad-\xff.txt") in rows
    assert LONG in rows
    for left_out in ("link", "nested", "new-intent.txt", "d1/f1.txt", "d2/f2.txt", "fresh.txt"):
        assert left_out not in rows, left_out
    assert sorted(attrs) == [b".gitattributes", b"sub/.gitattributes"]
    assert rows["d0/f3.txt"][4] == git(repo, "rev-parse", "HEAD:d0/f3.txt").strip()
    # a file's stat against an entry: the table (by the path's bytes) and the dict say the same
    table, plain = gitsource.parse_index_view(data, b"", racy), IndexView(rows=rows)
    assert table is not None and table.table is not None
    for rel, (size, mtime, ctime, ino, _blob) in rows.items():
        for key in ((size, mtime, ctime, ino, 0o100644), (size + (1 << 32), mtime, ctime, ino + (1 << 32), 0o100644),
                    (size + 1, mtime, ctime, ino, 0o100644), (size, mtime + 1, ctime, ino, 0o100644)):
            for threshold in (0, mtime + 1, 1 << 62):
                assert table.row(rel, key, threshold) == plain.row(rel, key, threshold), (rel, key)
        assert table.row(rel + "x", (size, mtime, ctime, ino, 0o100644), 0) is None
    # the stat-cache rows an index does not vouch for, in one pass: the same both ways
    cache = {}
    for rel, (size, mtime, ctime, ino, blob) in rows.items():
        cache[rel] = ((size, mtime, ctime, ino, 0o100644), blob, True, None)  # vouched for
        cache[rel + ".other-blob"] = ((size, mtime, ctime, ino, 0o100644), "0" * 40, True, None)
        cache[rel + ".link"] = ((size, mtime, ctime, ino, 0o120777), blob, True, "t")
    changed = [rel for rel in rows if rel.startswith("d1/")][:5]
    for rel in changed:
        size, mtime, ctime, ino, blob = rows[rel]
        cache[rel] = ((size, mtime + 1, ctime, ino, 0o100644), blob, True, None)  # stat differs
    cache[os.fsdecode(b"none-\xff")] = ((1, 2, 3, 4, 0o100644), "1" * 40, False, None)
    beyond = table.beyond(cache)
    assert beyond == plain.beyond(cache)
    assert os.fsdecode(b"bad-\xff.txt") not in beyond and "d0/f3.txt" not in beyond  # vouched for
    assert len(changed) == 5 and all(rel in beyond for rel in changed)
    assert len(beyond) == len(cache) - (len(rows) - 5)


def test_a_conflicted_index_reads_the_same_both_ways(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    merge_conflict(repo, "c.txt")
    data = (repo / ".git" / "index").read_bytes()
    c, py = _both(data, b"", 1 << 62, monkeypatch)
    assert c == py and c[0] is not None and "c.txt" not in c[0]  # conflict stages vouch for nothing


def test_damaged_bytes_give_none_or_rows_never_a_crash(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random damage behind an all-zero trailer (git's skipHash: no checksum to catch it): the C
    reader bounds-checks every length; both readers give None or a dict, never raise."""
    _shaped_repo(repo)
    rnd = random.Random(13)
    for version in (2, 4):
        git(repo, "update-index", "--index-version", str(version))
        good = (repo / ".git" / "index").read_bytes()[:-20]
        for _ in range(300):
            data = bytearray(good)
            for _ in range(rnd.randint(1, 4)):
                data[rnd.randrange(12, len(data))] = rnd.randrange(256)
            cut = rnd.choice([len(data), rnd.randrange(12, len(data))])
            damaged = bytes(data[:cut]) + bytes(20)
            c, py = _both(damaged, b"", 1 << 62, monkeypatch)
            assert c[0] is None or isinstance(c[0], dict)
            assert py[0] is None or isinstance(py[0], dict)
