"""A source file's syntax tree, parsed once per test process and content.

Nine architecture checks each walk every module of the packages (~90k lines): parsing them again
for each check cost a few seconds a check. The checks only read the trees (``ast.walk``, visitors),
never change them. The key is the file's bytes, so a file a test rewrites is parsed again.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=None)
def _parse(source: bytes, filename: str) -> ast.Module:
    return ast.parse(source, filename=filename)


def parsed(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``'s current bytes (shared: read it, do not change it)."""
    return _parse(path.read_bytes(), str(path))
