"""Helpers for the tracker's tests (a uniquely named module: the suite imports test dirs by basename)."""

from __future__ import annotations

import os
from pathlib import Path

from gitrefs.boundary import BoundaryLabel


def L(text: str) -> BoundaryLabel:  # noqa: N802 - reads like a literal
    return BoundaryLabel.parse(text)


def write(root: Path, rel: str, content: str | bytes, mode: int | None = None) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    p.write_bytes(content)
    if mode is not None:
        os.chmod(p, mode)
    return p
