"""One open document, compiled and indexed.

The document is compiled by ``load_workflow`` (what `iterion validate FILE` runs) with every
open buffer laid over the disk, so its diagnostics are validate's, bundles and imports
included. The index lists each declaration (where its name is written) and each reference
(a name in an edge, a property, ``outputs.X``/``vars.X`` in a template or expression, an
import or include path), over every `.bot` file of the unit, so navigation crosses imports.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from iterion.dsl import CompileResult, ast, load_workflow, parse
from iterion.dsl.grammar import TERMINAL_NAMES
from iterion.templates import relative_target

# kinds of declarations and references
NODE, PROMPT, SCHEMA, VAR, WORKFLOW, FIELD, FILE = "node", "prompt", "schema", "var", "workflow", "field", "file"

_TEMPLATE_REF = re.compile(r"(?<![\w.])(outputs|vars)\.(\w+)(?:\.(\w+))?")
_INCLUDE = re.compile(r'\{\{\s*include\s+"([^"]+)"')


@dataclass(frozen=True)
class Decl:
    kind: str
    name: str
    file: str  # as the loader names it (an absolute, normalised path)
    line: int  # 1-based, where the name is written
    column: int
    tree: object  # the syntax-tree declaration
    parent: str | None = None  # a schema field's schema

    @property
    def length(self) -> int:
        return len(self.name)

    @property
    def key(self) -> str:
        """What references name it by (a field: ``SCHEMA.FIELD``)."""
        return f"{self.parent}.{self.name}" if self.parent else self.name


@dataclass(frozen=True)
class Ref:
    kind: str  # NODE, PROMPT, SCHEMA, VAR, FIELD (``name``: SCHEMA.FIELD) or FILE (``name``: its path)
    name: str
    file: str
    line: int
    column: int
    length: int

    @property
    def key(self) -> str:
        return self.name


def _name_column(lines: list[str], line: int, column: int, name: str) -> int:
    """Where ``name`` is written on ``line`` at or after ``column`` (a header's keyword)."""
    if 0 < line <= len(lines):
        i = lines[line - 1].find(name, max(0, column - 1))
        if i >= 0:
            return i + 1
    return column


class Analysis:
    def __init__(self, path: str, text: str, buffers: Mapping[str, str], env: Mapping[str, str] | None = None):
        self.path = os.path.normpath(os.path.abspath(path))
        self.text = text
        self.result: CompileResult = load_workflow(self.path, env=env, overlay=_overlay(self.path, buffers))
        self.texts: dict[str, str] = {f.path: f.text for f in self.result.unit.files}
        self.texts.setdefault(self.path, text)
        self.trees: dict[str, ast.File] = {t.path: t for t in self.result.unit.asts}
        if self.path not in self.trees:  # the loader stopped before it (a bundle refused)
            self.trees[self.path] = parse(text, self.path)[0]
        self.decls: list[Decl] = []
        for file, tree in self.trees.items():
            self.decls.extend(self._decls(file, tree))
        names = {d.name: d.kind for d in self.decls if d.kind in (NODE, PROMPT, SCHEMA)}
        self.output_schema: dict[str, str] = {}  # node -> the schema its `output:` names
        for d in self.decls:
            out = d.tree.prop("output") if isinstance(d.tree, ast.NodeDecl) else None
            if out is not None and isinstance(out.value, ast.Ident):
                self.output_schema[d.name] = out.value.name
        self.refs: list[Ref] = []
        for file, tree in self.trees.items():
            self.refs.extend(self._refs(file, tree, names))

    # -- lookups --------------------------------------------------------------------------
    def lines(self, file: str) -> list[str]:
        from iterion.lsp.positions import lines_of

        return lines_of(self.texts.get(file, ""))

    def decl(self, kind: str, key: str) -> Decl | None:
        """The declaration of ``kind`` a reference's ``key`` names (a field: ``SCHEMA.FIELD``)."""
        return next((d for d in self.decls if d.kind == kind and d.key == key), None)

    def named(self, kind: str) -> list[Decl]:
        return [d for d in self.decls if d.kind == kind]

    def at(self, file: str, line: int, column: int) -> Decl | Ref | None:
        """The declaration or reference whose name covers ``line``:``column`` (1-based) in ``file``."""
        items: list[Decl | Ref] = [*self.refs, *self.decls]
        for item in items:
            if item.file == file and item.line == line and item.column <= column <= item.column + item.length:
                return item
        return None

    def references(self, kind: str, name: str) -> list[Ref]:
        return [r for r in self.refs if r.kind == kind and r.name == name]

    # -- indexing -------------------------------------------------------------------------
    def _decls(self, file: str, tree: ast.File) -> Iterator[Decl]:
        lines = self.lines(file)

        def at_name(kind: str, name: str, span: object, node: object, parent: str | None = None) -> Decl:
            line, col = span.line, span.column  # type: ignore[attr-defined]
            return Decl(kind, name, file, line, _name_column(lines, line, col, name), node, parent)

        for d in tree.decls:
            if isinstance(d, ast.NodeDecl):
                yield Decl(NODE, d.name, file, d.name_span.line, d.name_span.column, d)
            elif isinstance(d, ast.PromptDecl):
                yield at_name(PROMPT, d.name, d.span, d)
            elif isinstance(d, ast.SchemaDecl):
                yield at_name(SCHEMA, d.name, d.span, d)
                for f in d.fields:
                    yield at_name(FIELD, f.name, f.span, f, d.name)
            elif isinstance(d, ast.VarsDecl):
                yield from (at_name(VAR, v.name, v.span, v) for v in d.vars)
            elif isinstance(d, ast.WorkflowDecl):
                yield at_name(WORKFLOW, d.name, d.span, d)
                yield from (at_name(VAR, v.name, v.span, v) for v in d.vars)

    def _refs(self, file: str, tree: ast.File, names: Mapping[str, str]) -> Iterator[Ref]:
        def ident(i: ast.Ident, default: str | None = None) -> Iterator[Ref]:
            kind = names.get(i.name) or default
            if kind is not None:
                yield Ref(kind, i.name, file, i.span.line, i.span.column, len(i.name))

        for d in tree.decls:
            if isinstance(d, ast.ImportDecl):
                target = relative_target(os.path.dirname(file), d.path)
                yield Ref(FILE, target, file, d.span.line, d.span.column, len("import ") + len(d.path) + 2)
            elif isinstance(d, (ast.NodeDecl, ast.WorkflowDecl)):
                for p in d.properties:
                    for value in (p.value.items if isinstance(p.value, ast.ListValue) else (p.value,)):
                        if isinstance(value, ast.Ident):
                            yield from ident(value)
            if isinstance(d, ast.WorkflowDecl):
                for e in d.edges:
                    yield from ident(e.src, NODE)
                    if e.dst.name not in TERMINAL_NAMES:
                        yield from ident(e.dst, NODE)
        for n, line in enumerate(self.lines(file), start=1):
            for m in _TEMPLATE_REF.finditer(line):
                kind = NODE if m.group(1) == "outputs" else VAR
                yield Ref(kind, m.group(2), file, n, m.start(2) + 1, len(m.group(2)))
                schema = self.output_schema.get(m.group(2)) if kind == NODE and m.group(3) else None
                if schema is not None:  # outputs.NODE.FIELD: the field of the node's output schema
                    yield Ref(FIELD, f"{schema}.{m.group(3)}", file, n, m.start(3) + 1, len(m.group(3)))
            for m in _INCLUDE.finditer(line):
                target = relative_target(os.path.dirname(file), m.group(1))
                yield Ref(FILE, target, file, n, m.start(1) + 1, len(m.group(1)))


def _overlay(path: str, buffers: Mapping[str, str]) -> dict[str, str]:
    """The open buffers to lay over the disk. A buffer of a file that is not UTF-8 on disk is the
    editor's decoded copy, not the file: that file is read from disk (and reported P010)."""
    out = {}
    for file, text in buffers.items():
        try:
            Path(file).read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
        except OSError:
            pass  # not on disk (yet): the buffer is all there is
        out[file] = text
    return out
