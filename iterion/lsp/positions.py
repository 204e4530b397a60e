"""The validator counts 1-based lines and columns in characters; LSP counts 0-based lines and
UTF-16 code units (its default position encoding): a name after an emoji shifts otherwise."""

from __future__ import annotations

from lsprotocol import types as lsp


def lines_of(text: str) -> list[str]:
    """The document's lines as LSP sees them (``\\r\\n``, ``\\n`` or ``\\r`` ends a line)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def to_position(lines: list[str], line: int, column: int) -> lsp.Position:
    """``line``:``column`` (1-based, characters) as an LSP position, clamped to the document."""
    row = max(0, min(line - 1, len(lines) - 1)) if lines else 0
    text = lines[row] if lines else ""
    col = max(0, min(column - 1, len(text)))
    return lsp.Position(line=row, character=_utf16_len(text[:col]))


def to_column(lines: list[str], pos: lsp.Position) -> tuple[int, int]:
    """An LSP position as (0-based line, 0-based character index in that line)."""
    if not lines or pos.line >= len(lines):
        return len(lines), 0
    text = lines[pos.line]
    units = 0
    for i, c in enumerate(text):
        if units >= pos.character:
            return pos.line, i
        units += 2 if ord(c) > 0xFFFF else 1
    return pos.line, len(text)


def word_range(lines: list[str], line: int, column: int) -> lsp.Range:
    """The range of the name starting at ``line``:``column`` (1-based), or of one character."""
    start = to_position(lines, line, column)
    row = line - 1
    if not 0 <= row < len(lines):
        return lsp.Range(start=start, end=start)
    text = lines[row]
    i = j = max(0, column - 1)
    while j < len(text) and (text[j].isalnum() or text[j] in "_.-"):
        j += 1
    if j == i:
        j = min(i + 1, len(text))
    return lsp.Range(start=start, end=to_position(lines, line, j + 1))


def span_range(lines: list[str], line: int, column: int, length: int) -> lsp.Range:
    return lsp.Range(start=to_position(lines, line, column), end=to_position(lines, line, column + length))
