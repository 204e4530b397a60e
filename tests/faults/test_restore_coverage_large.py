"""Files over the old 10 MiB limit: captured streamed, sparse files kept sparse; over the
(configurable) limit: named at capture (event) and at rewind (files.skipped). In place."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from .coverage_harness import du, run_and_rewind, setup

MB = 2**20


def sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MB):
            h.update(chunk)
    return h.hexdigest()


def content_digest(path: Path, block: int = MB) -> tuple[int, list[tuple[int, bytes]]]:
    """The file's full content, exactly, without reading its holes: its size and the SHA-256 of
    every ``block``-aligned block holding a non-zero byte (every other byte is zero). Only the
    blocks a data extent touches are read (SEEK_DATA/SEEK_HOLE; a hole reads as zeros by
    definition), so a 1 GiB sparse file costs its few extents, not a gigabyte of hashing."""
    size = path.stat().st_size
    zero = bytes(block)
    touched: set[int] = set()
    with open(path, "rb") as f:
        fd, pos = f.fileno(), 0
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:  # ENXIO: no data after pos; EINVAL: no hole support, all data
                if e.errno == errno.ENXIO:
                    break
                data, pos = pos, size
                touched.update(range(data // block, -(-size // block)))
                break
            pos = min(os.lseek(fd, data, os.SEEK_HOLE), size)
            touched.update(range(data // block, -(-pos // block)))
        blocks = []
        for k in sorted(touched):
            chunk = os.pread(fd, block, k * block)
            if chunk != zero[:len(chunk)]:
                blocks.append((k * block, hashlib.sha256(chunk).digest()))
    return size, blocks


def test_a_50mb_binary_a_node_overwrote_comes_back(repo: Path, tmp_path: Path) -> None:
    big = repo / "assets" / "model.bin"
    big.parent.mkdir()
    big.write_bytes(os.urandom(50 * MB))
    os.chmod(big, 0o600)
    want = sha(big)
    setup(repo, tmp_path, """
        with open("assets/model.bin", "r+b") as f:
            f.seek(25 * 2**20)
            f.write(b"corrupted by the node" * 1000)
        open("assets/new.bin", "wb").write(os.urandom(12 * 2**20))
    """)
    r = run_and_rewind(repo, tmp_path / "store", text_too=False)
    assert sha(big) == want and big.stat().st_mode & 0o777 == 0o600
    assert not (repo / "assets" / "new.bin").exists()
    assert r.files["restored"] == ["assets/model.bin"] and r.files["removed"] == ["assets/new.bin"]
    assert r.files["skipped"] == [] and r.capture_events == []


@pytest.mark.heavy  # a 1 GiB file captured and restored: the heavy tier (.ci/run)
def test_a_1gb_sparse_file_comes_back_without_a_gigabyte_in_the_store(repo: Path, tmp_path: Path) -> None:
    sparse = repo / "disk.img"
    with open(sparse, "wb") as f:
        f.truncate(2**30)
        for off in (0, 300 * MB, 2**30 - 4096):
            f.seek(off)
            f.write(b"data extent at %d\n" % off)
    want = content_digest(sparse)
    setup(repo, tmp_path, """
        with open("disk.img", "r+b") as f:  # the node overwrites the image
            f.seek(512 * 2**20)
            f.write(os.urandom(2**20))
            f.seek(0)
            f.write(b"OVERWRITTEN")
    """)
    store = tmp_path / "store"
    r = run_and_rewind(repo, store, text_too=False)
    assert r.files["restored"] == ["disk.img"] and r.files["skipped"] == []
    assert sparse.stat().st_size == 2**30 and content_digest(sparse) == want
    # the store holds the data extents (and the node's 1 MiB), not a gigabyte of zeros
    assert du(store) < 64 * MB, du(store)
    # and the restored file is sparse again
    assert sparse.stat().st_blocks * 512 < 64 * MB


def test_a_file_over_the_limit_is_named_at_capture_and_at_rewind(repo: Path, tmp_path: Path) -> None:
    (repo / "huge.dat").write_bytes(b"h" * (3 * MB))
    (repo / "small.txt").write_bytes(b"small\n")
    setup(repo, tmp_path, """
        open("huge.dat", "ab").write(b"appended by the node")
        open("small.txt", "wb").write(b"changed\\n")
    """)
    env = {"ITERION_TRACK_MAX_FILE_SIZE": "2M"}
    r = run_and_rewind(repo, tmp_path / "store", env=env)
    assert (repo / "small.txt").read_bytes() == b"small\n"
    reason = r.skipped()["huge.dat"]
    assert reason.startswith("oversized") and "2 MiB" in reason and "ITERION_TRACK_MAX_FILE_SIZE" in reason
    assert {s["path"]: s["reason"] for s in r.event["files_skipped"]}["huge.dat"] == reason
    assert f"skipped huge.dat ({reason})" in r.text
    # named at capture, on the run's timeline, once (the first boundary that left it out)
    assert len(r.capture_events) == 1
    ev = r.capture_events[0]
    assert ev["label"] == "pre:prepare:0"
    assert [s["path"] for s in ev["skipped"]] == ["huge.dat"] and ev["skipped"][0]["reason"].startswith("oversized")


def test_a_bad_size_limit_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    from .coverage_harness import cli

    setup(repo, tmp_path, "pass\n")
    code, out, err = cli(repo, tmp_path / "store", "run", "cov.bot", env={"ITERION_TRACK_MAX_FILE_SIZE": "lots"})
    # refused before any node runs (the engine gives every unversionable workspace exit 1)
    assert code not in (0, 3) and "ITERION_TRACK_MAX_FILE_SIZE" in err and "Traceback" not in err, (code, out, err)
