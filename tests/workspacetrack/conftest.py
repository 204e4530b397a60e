"""Fixtures for the tracker's tests: real directories, real git repositories, real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .track_helpers import write
from workspacetrack import walk
from workspacetrack.tracker import Tracker


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests write and capture within milliseconds; trust a stat once the capture started after it."""
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 0)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A plain (non-git) workspace with a few files."""
    root = tmp_path / "ws"
    write(root, "README.md", "hello\n")
    write(root, "src/app.py", "print('v1')\n")
    write(root, "src/util.py", "X = 1\n")
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "state" / "track"


@pytest.fixture
def tracker(ws: Path, store: Path) -> Iterator[Tracker]:
    t = Tracker(store, ws, "run-1")
    yield t
    t.stop_watching()
