"""The pins a capture seals are made durable in one batch (gitrefs.persist.sync_paths) whose short-lived
commit file goes in the git dir's root - never inside .git/objects/xx or refs/iterion/pins, where
git would take it for an object or a ref (workspacetrack/gitsource.py)."""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from pathlib import Path

import pytest

from workspacetrack import Tracker
from workspacetrack.gitsource import pin_ref

from ..conftest import git
from .track_helpers import L, write

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux-only")

IN_CREATE, IN_MOVED_TO, IN_NONBLOCK = 0x100, 0x80, 0o4000


class Created:
    """Every name created (or renamed in) in the watched directories, read back with inotify."""

    def __init__(self, dirs: list[Path]) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        assert self.fd >= 0
        self.wd: dict[int, Path] = {}
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(d), IN_CREATE | IN_MOVED_TO)
            assert wd >= 0
            self.wd[wd] = d

    def names(self) -> list[Path]:
        out: list[Path] = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            i = 0
            while i < len(buf):
                wd, _mask, _cookie, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0")
                out.append(self.wd[wd] / os.fsdecode(name))
                i += 16 + n
        os.close(self.fd)
        return out


def test_pin_objects_and_ref_are_synced_without_a_stray_name(repo: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ITERION_FSYNC_METHOD", raising=False)  # the batch, not one fsync per file
    write(repo, "a.txt", "committed\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a")
    gitdir = repo / ".git"
    pins = gitdir / Path(pin_ref("r")).parent
    watched = [gitdir, pins, *(gitdir / "objects" / f"{i:02x}" for i in range(256))]
    created = Created(watched)
    t = Tracker(tmp_path / "store", repo, "r")
    t.capture(L("nodes:n:0"))
    seen = created.names()
    pinned = git(repo, "rev-parse", "--verify", pin_ref("r")).strip()
    assert pinned
    git(repo, "fsck", "--no-dangling")  # nothing git would take for a broken object or ref
    in_objects = [p for p in seen if p.parent.parent == gitdir / "objects"]
    assert in_objects, "the pin wrote loose objects"
    for p in in_objects:  # objects only (libgit2 writes them through a tmp_object_* file)
        assert len(p.parent.name + p.name) == 40 or p.name.startswith("tmp_object"), p
    assert all(p.name == Path(pin_ref("r")).name or p.name.endswith(".lock") for p in seen if p.parent == pins)
    # the batch commit's file went in the git dir's root, and is gone again
    syncs = [p for p in seen if p.parent == gitdir and p.name.startswith("iterion-pin-sync")]
    assert syncs and not any(p.exists() for p in syncs)
