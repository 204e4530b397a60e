"""Document symbols: the workflow (its vars inside), nodes, prompts, schemas (their fields
inside) and vars declared in this file."""

from __future__ import annotations

from lsprotocol import types as lsp

from iterion.dsl import ast
from iterion.lsp.analysis import FIELD, NODE, PROMPT, SCHEMA, VAR, WORKFLOW, Analysis, Decl
from iterion.lsp.positions import span_range, to_position

_KINDS = {NODE: lsp.SymbolKind.Function, PROMPT: lsp.SymbolKind.String, SCHEMA: lsp.SymbolKind.Struct,
          VAR: lsp.SymbolKind.Variable, WORKFLOW: lsp.SymbolKind.Module, FIELD: lsp.SymbolKind.Field}


def _detail(d: Decl) -> str:
    t = d.tree
    if isinstance(t, ast.NodeDecl):
        return t.kind
    if isinstance(t, (ast.VarDecl, ast.SchemaFieldDecl)):
        return t.type.name
    return d.kind


def document_symbols(analysis: Analysis) -> list[lsp.DocumentSymbol]:
    lines = analysis.lines(analysis.path)
    mine = [d for d in analysis.decls if d.file == analysis.path]

    def symbol(d: Decl, end_line: int, children: list[lsp.DocumentSymbol] | None = None) -> lsp.DocumentSymbol:
        sel = span_range(lines, d.line, d.column, d.length)
        end = to_position(lines, end_line, len(lines[end_line - 1]) + 1 if 0 < end_line <= len(lines) else 1)
        return lsp.DocumentSymbol(name=d.name, kind=_KINDS[d.kind], detail=_detail(d),
                                  range=lsp.Range(start=lsp.Position(line=d.line - 1, character=0), end=end),
                                  selection_range=sel, children=children)

    # a top-level declaration runs up to the line before the next one
    tops = [d for d in mine if d.kind in (NODE, PROMPT, SCHEMA, WORKFLOW)]
    starts = sorted({d.line for d in tops})
    def end_of(line: int) -> int:
        later = [s for s in starts if s > line]
        return (later[0] - 1) if later else len(lines)

    out: list[lsp.DocumentSymbol] = []
    for d in mine:
        if d.kind == SCHEMA:
            fields = [symbol(f, f.line) for f in mine if f.kind == FIELD and f.parent == d.name]
            out.append(symbol(d, end_of(d.line), fields))
        elif d.kind == WORKFLOW:
            wvars = [symbol(v, v.line) for v in mine if v.kind == VAR and isinstance(d.tree, ast.WorkflowDecl)
                     and any(v.tree is w for w in d.tree.vars)]
            out.append(symbol(d, end_of(d.line), wvars))
        elif d.kind in (NODE, PROMPT):
            out.append(symbol(d, end_of(d.line)))
        elif d.kind == VAR and not any(isinstance(w.tree, ast.WorkflowDecl) and any(d.tree is v for v in w.tree.vars)
                                       for w in mine if w.kind == WORKFLOW):
            out.append(symbol(d, d.line))
    return out
