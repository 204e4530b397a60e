"""Go to definition and find references, across the unit's files (imports included)."""

from __future__ import annotations

import os
from pathlib import Path

from lsprotocol import types as lsp

from iterion.lsp.analysis import FILE, Analysis, Decl, Ref
from iterion.lsp.positions import span_range


def uri_of(path: str) -> str:
    return Path(path).as_uri()


def location(analysis: Analysis, item: Decl | Ref) -> lsp.Location:
    return lsp.Location(uri=uri_of(item.file),
                        range=span_range(analysis.lines(item.file), item.line, item.column, item.length))


def definition(analysis: Analysis, item: Decl | Ref | None) -> lsp.Location | None:
    if item is None:
        return None
    if isinstance(item, Ref) and item.kind == FILE:
        if not os.path.exists(item.name):
            return None
        start = lsp.Position(line=0, character=0)
        return lsp.Location(uri=uri_of(item.name), range=lsp.Range(start=start, end=start))
    target = analysis.decl(item.kind, item.key)
    return None if target is None else location(analysis, target)


def references(analysis: Analysis, item: Decl | Ref | None, include_declaration: bool) -> list[lsp.Location]:
    if item is None or (isinstance(item, Ref) and item.kind == FILE):
        return []
    out = [location(analysis, r) for r in analysis.references(item.kind, item.key)]
    target = analysis.decl(item.kind, item.key)
    if include_declaration and target is not None:
        out.insert(0, location(analysis, target))
    return out
