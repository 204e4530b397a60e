"""A piece of source text that knows where it sits, so an offset inside it becomes file:line:col.

Templates and expressions report problems as 0-based offsets in their own text; the DSL turns
those into spans through this (a quoted string on one line, a raw prompt body, an included file).
"""

from __future__ import annotations

from dataclasses import dataclass

from iterion.ir import Span


@dataclass(frozen=True)
class Located:
    text: str
    origin: Span  # where offset 0 is
    indent: int = 0  # 0-based column where every following line starts (raw bodies)

    def span_at(self, offset: int) -> Span:
        offset = max(0, min(offset, len(self.text)))
        prefix = self.text[:offset]
        nl = prefix.count("\n")
        if nl == 0:
            return Span(self.origin.file, self.origin.line, self.origin.column + offset)
        return Span(self.origin.file, self.origin.line + nl, self.indent + offset - prefix.rfind("\n"))
