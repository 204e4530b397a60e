"""``set_override`` makes ``open_versioning`` choose the in-memory mechanism for every run shape,
and clearing it brings each shape's own mechanism back (the engine tests' ``memory_versioning``)."""

from __future__ import annotations

from pathlib import Path

from iterion.engine.versioning import GitVersioning, TrackVersioning, open_versioning, set_override
from iterion.engine.versioning_memory import MemoryVersioning, use_memory_versioning
from tests.conftest import make_checkout


def test_the_override_applies_to_every_run_shape_and_clears(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    use_memory_versioning()
    try:
        for worktree in (True, False):
            v = open_versioning(worktree=worktree, workspace=ws, run_dir=tmp_path / "run", run_id="r1", watch=False)
            assert isinstance(v, MemoryVersioning)
    finally:
        set_override(None)
    v_track = open_versioning(worktree=False, workspace=ws, run_dir=tmp_path / "run", run_id="r1", watch=False)
    v_git = open_versioning(worktree=True, workspace=ws, run_dir=tmp_path / "run", run_id="r1", start=True,
                            watch=False)
    assert isinstance(v_track, TrackVersioning) and isinstance(v_git, GitVersioning)
    v_track.close()
    v_git.close()


def test_a_reopened_memory_run_finds_its_chain(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    from gitrefs.boundary import BoundaryLabel

    first = MemoryVersioning(ws, "r1")
    first.mark(BoundaryLabel.parse("pre:a:0"))
    assert MemoryVersioning(ws, "r1").labels() == ["pre:a:0"]
    assert MemoryVersioning(ws, "r2").labels() == []
