"""A piece of source text that knows where it sits, so an offset inside it becomes file:line:col.

Templates and expressions report problems as 0-based offsets in their own text; the DSL turns
those into spans through this (a quoted string on one line, a raw prompt body, an included file).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from functools import cached_property

from iterion.ir import Span


@dataclass(frozen=True)
class Located:
    text: str
    origin: Span  # where offset 0 is
    indent: int = 0  # 0-based column where every following line starts (raw bodies)

    @cached_property
    def _newlines(self) -> list[int]:
        # found once per text: a prompt with 100,000 markers asks for 100,000 spans, and
        # counting the newlines of the prefix each time was quadratic in the body
        out: list[int] = []
        find = self.text.find
        i = find("\n")
        while i >= 0:
            out.append(i)
            i = find("\n", i + 1)
        return out

    def span_at(self, offset: int) -> Span:
        offset = max(0, min(offset, len(self.text)))
        newlines = self._newlines
        nl = bisect_left(newlines, offset)  # the newlines before ``offset``
        if nl == 0:
            return Span(self.origin.file, self.origin.line, self.origin.column + offset)
        return Span(self.origin.file, self.origin.line + nl, self.indent + offset - newlines[nl - 1])
