"""Validate's diagnostics as LSP diagnostics: the same code, severity and message (as
`iterion validate` prints it, the hint on the next line), grouped by the file they are in."""

from __future__ import annotations

import os

from lsprotocol import types as lsp

from iterion.dsl import Diagnostic, Severity
from iterion.lsp.analysis import Analysis
from iterion.lsp.positions import lines_of, word_range

SOURCE = "iterion"


def to_lsp(d: Diagnostic, lines: list[str]) -> lsp.Diagnostic:
    message = _message(d)
    return lsp.Diagnostic(
        range=word_range(lines, d.span.line, d.span.column),
        message=message,
        severity=lsp.DiagnosticSeverity.Error if d.severity is Severity.ERROR else lsp.DiagnosticSeverity.Warning,
        code=d.code,
        source=SOURCE,
    )


def _message(d: Diagnostic) -> str:
    """validate's line after ``file:line:col: `` (``CODE severity: message``, then the hint)."""
    head, _, rest = d.format().partition("\n")
    where = f"{d.span}: "
    return (head[len(where):] if head.startswith(where) else head) + (f"\n{rest.strip()}" if rest else "")


def by_file(analysis: Analysis) -> dict[str, list[lsp.Diagnostic]]:
    """Every diagnostic of the unit, keyed by the absolute path of its file (the document's
    own key is always present, so a fixed file's diagnostics are cleared)."""
    out: dict[str, list[lsp.Diagnostic]] = {analysis.path: []}
    for d in analysis.result.diagnostics:
        file = os.path.normpath(os.path.abspath(d.span.file))
        text = analysis.texts.get(file)
        if text is None:
            try:
                text = open(file, encoding="utf-8", errors="replace").read()
            except OSError:
                text = ""
        out.setdefault(file, []).append(to_lsp(d, lines_of(text)))
    return out
