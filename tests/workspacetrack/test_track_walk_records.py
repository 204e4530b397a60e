"""The walk's per-directory shortcut (an unchanged directory is vouched for by the previous walk's
record) must see every change a cold walk sees: each step's capture by a long-lived tracker is
compared with a cold capture of the same disk state by a tracker with no stat cache."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .track_helpers import L, write
from workspacetrack import Tracker, walk
from workspacetrack.store import TrackStore


@pytest.fixture(autouse=True, params=["c", "python"])
def walk_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with the C listing (workspacetrack._fastwalk) and with its Python twin."""
    if request.param == "python":
        monkeypatch.setattr(walk, "_fast", None)
    else:
        assert walk._fast is not None, "workspacetrack._fastwalk is not built (setup.py; needs a C compiler)"
    return str(request.param)


def _grow(p: Path, text: str) -> None:
    """Rewrite with a different size, so the change shows in the stat even within one clock tick."""
    p.write_bytes(p.read_bytes() + text.encode())


def test_walk_records_agree_with_a_cold_walk_step_by_step(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    write(ws, ".gitignore", "*.pyc\nbuild/\ngen\n!gen/\n")
    write(ws, "a/x.py", "x = 1\n")
    write(ws, "a/y.pyc", "compiled\n")
    write(ws, "a/b/z.txt", "zed\n")
    write(ws, "build/out.bin", "artefact\n")
    write(ws, "keep/gen", "a file named gen is ignored\n")
    write(ws, "keep/only.txt", "only\n")

    def unencodable() -> None:
        fd = os.open(os.fsencode(str(ws / "keep")) + b"/bad-\xff.txt", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"undecodable name\n")
        os.close(fd)

    steps: list[tuple[str, Callable[[], None]]] = [
        ("unchanged", lambda: None),
        ("new file", lambda: write(ws, "a/new.txt", "new\n")),
        ("deleted file", lambda: (ws / "a/x.py").unlink()),
        ("modified file", lambda: _grow(ws / "a/b/z.txt", "more\n")),
        ("renamed within its directory", lambda: (ws / "a/new.txt").rename(ws / "a/renamed.txt")),
        ("ignored file gone, new file in its place (same count)",
         lambda: ((ws / "a/y.pyc").unlink(), write(ws, "a/w.py", "w\n"))),
        ("ignored file replaced by a re-included directory",
         lambda: ((ws / "keep/gen").unlink(), write(ws, "keep/gen/f.txt", "inside\n"))),
        ("rule file added in a subdirectory", lambda: write(ws, "a/.gitignore", "*.txt\n")),
        ("unchanged under the new rule", lambda: None),
        ("rule file removed", lambda: (ws / "a/.gitignore").unlink()),
        ("root rules changed", lambda: _grow(ws / ".gitignore", "*.py\n")),
        ("file replaced by a directory of the same name",
         lambda: ((ws / "a/b/z.txt").unlink(), write(ws, "a/b/z.txt/inner", "nested\n"))),
        ("symlink added", lambda: os.symlink("only.txt", ws / "keep/link")),
        ("mode changed", lambda: os.chmod(ws / "keep/only.txt", 0o755)),
        ("unencodable name added", unencodable),
        ("unchanged with an unencodable name", lambda: None),
        ("unencodable name removed", lambda: (ws / "keep").joinpath(os.fsdecode(b"bad-\xff.txt")).unlink()),
        ("ignored directory gains files", lambda: write(ws, "build/more.bin", "more\n")),
        ("file replaced by an empty directory",
         lambda: ((ws / "keep/only.txt").unlink(), (ws / "keep/only.txt").mkdir())),
        ("empty directory gains a file", lambda: write(ws, "keep/only.txt/now.txt", "now\n")),
        ("directory replaced by a file of the same name",
         lambda: (shutil.rmtree(ws / "keep/only.txt"), write(ws, "keep/only.txt", "a file again\n"))),
        ("whole directory removed", lambda: shutil.rmtree(ws / "a/b")),
        ("unchanged at the end", lambda: None),
    ]
    live = Tracker(store, ws, "live")
    live.capture(L("nodes:n:0"))
    for i, (what, change) in enumerate(steps, start=1):
        change()
        rec = live.capture(L(f"nodes:n:{i}"))
        cold = Tracker(store, ws, f"cold-{i}")
        cold.rules.freeze(live.rules.recorded())  # the rules in force: those of live's start
        want = cold.manifest(cold.capture(L("nodes:n:0")).id)
        got = live.manifest(rec.id)
        assert (got.entries, got.skipped) == (want.entries, want.skipped), what
        # what is on disk (a delta against the previous walk's manifest) reads back the same
        disk = TrackStore(store, "live").read_manifest(rec.manifest)
        assert (disk.entries, disk.skipped) == (want.entries, want.skipped), what
        if what.startswith("unchanged"):
            assert live.last_capture is not None and live.last_capture.hashed == 0, what
    final = live.manifest(live.snapshots()[-1].id)
    assert "a/b/z.txt/inner" not in final.entries and "keep/gen/f.txt" in final.entries
    assert "a/w.py" in final.entries  # *.py was added mid-run: the rules of the run's start hold


def test_walks_store_deltas_and_say_what_changed(tmp_path: Path) -> None:
    """A walk after a walk of the same process stores only what changed (a delta manifest) and
    the snapshot names the changed paths, as a journal capture does."""
    ws, store = tmp_path / "ws", tmp_path / "store"
    for i in range(200):
        write(ws, f"d{i % 4}/f{i}.txt", f"file {i}\n")
    live = Tracker(store, ws, "live")
    first = live.capture(L("nodes:n:0"))
    _grow(ws / "d1/f1.txt", "more\n")
    (ws / "d2/f2.txt").unlink()
    write(ws, "d3/new.txt", "new\n")
    rec = live.capture(L("nodes:n:1"))
    assert sorted(rec.changed or []) == ["d1/f1.txt", "d2/f2.txt", "d3/new.txt"]
    raw = TrackStore(store, "live")
    delta = raw.objects.read(rec.manifest)
    assert len(delta) < 1000 and first.manifest.encode() in delta  # a delta on the first manifest
    assert raw.depth_of(rec.manifest) == 1 and raw.depth_of(first.manifest) == 0  # read from the tails
    assert set(raw.read_manifest(rec.manifest).entries) == set(live.manifest(first.id).entries) - {"d2/f2.txt"} | {"d3/new.txt"}
    # an unchanged walk records the same manifest; the changed set is empty
    again = live.capture(L("nodes:n:2"))
    assert again.manifest == rec.manifest and again.changed == []
