"""Parser: logical lines -> indentation tree -> ``ast.File``.

Errors never raise out of ``parse``: each becomes a diagnostic and the parser skips the
offending line (or declaration) and carries on, so one typo yields one message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from iterion.dsl import ast
from iterion.dsl.diagnostics import Diagnostic, Severity, make
from iterion.dsl.grammar import (
    ATTACHMENT_PROPERTIES,
    KEYWORDS,
    NAMED_EXTENSIONS,
    NODE_KINDS,
    NODE_PROPERTIES,
    TERMINAL_NAMES,
    TOP_LEVEL_KEYWORDS,
    WORKFLOW_BODY_KEYWORDS,
    WORKFLOW_PROPERTIES,
    suggest,
)
from iterion.dsl.lexer import DOTTED, FLOAT, IDENT, INT, STRING, Line, Token, iter_lines
from iterion.ir import Span

_T = TypeVar("_T")
MAX_SOURCE_BYTES = 10 * 1024 * 1024  # docs/language.md 1.1
_MAX_NESTING = 100  # indentation levels and list/map nesting (docs/language.md §1.1); recursion stays far from its limit


class _Error(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        self.diag = diag


def too_large(file: str, where: Span) -> Diagnostic:
    """The language's size limit (docs/language.md §1 "at most 10 MiB"; §7 "size or nesting
    limit → P008"), whether the parser sees the text or the reader refuses it unread."""
    return make("P008", where, f"{file} is larger than the 10 MiB a workflow source may hold",
                "split it: import \"lib/part.bot\" adds another file's declarations")


def parse(text: str, file: str) -> tuple[ast.File, list[Diagnostic]]:
    """The file's syntax tree and its diagnostics (lexer's, then indentation's, then parser's).

    Streaming: each top-level block is parsed as soon as the lexer has produced its last line,
    and its tokens are then dropped; only the syntax tree grows with the file.
    """
    if len(text) > MAX_SOURCE_BYTES // 4 and len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        return ast.File(file, (), Span(file, 1, 1)), [too_large(file, Span(file, 1, 1))]
    lex_diags: list[Diagnostic] = []
    tree_diags: list[Diagnostic] = []
    parse_diags: list[Diagnostic] = []
    p = _Parser(file, parse_diags)
    decls: list[ast.Decl] = []
    for line in _build_tree(iter_lines(text, file, lex_diags), tree_diags, file):
        if line.broken:
            continue
        try:
            decl = p.top_level(line)
        except _Error as err:
            parse_diags.append(err.diag)
            continue
        if decl is not None:
            decls.append(decl)
    decls = _drop_duplicate_blocks(decls, parse_diags)
    return ast.File(file, tuple(decls), Span(file, 1, 1)), [*lex_diags, *tree_diags, *parse_diags]


_ONCE = {ast.VarsDecl: "vars", ast.PresetsDecl: "presets", ast.AttachmentsDecl: "attachments"}


def _drop_duplicate_blocks(decls: list[ast.Decl], diags: list[Diagnostic]) -> list[ast.Decl]:
    """``vars:``, ``presets:`` and ``attachments:`` at most once per file: a second block is a
    P008 error and the first is kept (docs/language.md 2.1)."""
    seen: dict[str, Span] = {}
    kept: list[ast.Decl] = []
    for d in decls:
        kw = _ONCE.get(type(d))
        if kw is not None:
            span = d.span  # type: ignore[union-attr]
            if kw in seen:
                diags.append(make("P008", span, f"a second top-level '{kw}:' block (first at line {seen[kw].line})",
                                  f"merge the two '{kw}:' blocks into one"))
                continue
            seen[kw] = span
        kept.append(d)
    return kept


def _build_tree(lines: Iterable[Line], diags: list[Diagnostic], file: str) -> Iterator[Line]:
    """The top-level lines with their children, each yielded once its block is complete.

    Any deeper indentation opens a level (two spaces is the convention, not the rule): the
    first line of a block fixes its indentation, and a dedent must land exactly on an enclosing
    level (docs/language.md §1.2); top-level lines start at column 1."""
    root = Line(-1, [], 0, 0)
    stack: list[Line] = [root]
    for line in lines:
        while stack[-1].indent >= line.indent:
            stack.pop()
        parent = stack[-1]
        level = parent.children[0].indent if parent.children else (0 if parent is root else None)
        if level is not None and line.indent != level and not line.broken:
            where = "at the top level" if parent is root else f"under line {parent.line}"
            diags.append(make("P001", Span(file, line.line, line.col),
                              f"unexpected indentation: expected {level} spaces {where}, found {line.indent}",
                              "indent the lines of one block alike; a dedent returns to an enclosing level"))
            line.broken = True
        if len(stack) > _MAX_NESTING and not line.broken:
            diags.append(make("P008", Span(file, line.line, line.col),
                              f"this line nests more than {_MAX_NESTING} levels deep"))
            line.broken = True
        if parent is root:
            yield from root.children  # the previous block is complete: parse it, then drop it
            root.children.clear()
        parent.children.append(line)
        stack.append(line)
    yield from root.children


def _tok_span(file: str, t: Token) -> Span:
    return Span(file, t.line, t.col)


def _describe(t: Token) -> str:
    return f"'{t.text}'"


class _Parser:
    def __init__(self, file: str, diags: list[Diagnostic]) -> None:
        self.file = file
        self.diags = diags

    # --- helpers ------------------------------------------------------------------------------

    def span(self, line: Line) -> Span:
        return Span(self.file, line.line, line.col)

    def err(self, code: str, span: Span, message: str, hint: str | None = None) -> _Error:
        return _Error(make(code, span, message, hint))

    def end_span(self, line: Line) -> Span:
        last = line.tokens[-1]
        return Span(self.file, last.line, last.col + len(last.text))

    def expect_end(self, line: Line, pos: int, what: str) -> None:
        if pos < len(line.tokens):
            t = line.tokens[pos]
            raise self.err("P008", _tok_span(self.file, t), f"unexpected {_describe(t)} after {what}")

    def expect_punct(self, line: Line, pos: int, p: str, after: str) -> int:
        if pos >= len(line.tokens):
            raise self.err("P008", self.end_span(line), f"expected '{p}' after {after}")
        t = line.tokens[pos]
        if not t.is_punct(p):
            raise self.err("P008", _tok_span(self.file, t), f"expected '{p}' after {after}, found {_describe(t)}")
        return pos + 1

    def expect_ident(self, line: Line, pos: int, what: str) -> tuple[Token, int]:
        if pos >= len(line.tokens):
            raise self.err("P008", self.end_span(line), f"expected {what}")
        t = line.tokens[pos]
        if t.kind != IDENT:
            raise self.err("P008", _tok_span(self.file, t), f"expected {what}, found {_describe(t)}",
                           "names are a letter then letters, digits or '_'")
        return t, pos + 1

    def expect_name(self, line: Line, pos: int, what: str) -> tuple[Token, int]:
        """A declared name: an identifier other than ``inherit_if_available``, which "is never a
        name" (docs/language.md 1: the original lexes it as a keyword, so it is a wrong token, P008)."""
        t, after = self.expect_ident(line, pos, what)
        if t.value == "inherit_if_available":
            raise self.err("P008", _tok_span(self.file, t), f"expected {what}, found the keyword 'inherit_if_available'",
                           "it is only a session value; pick another name")
        return t, after

    def no_children(self, line: Line, what: str, code: str = "P001", hint: str | None = None) -> None:
        for child in line.children:
            if not child.broken:
                self.diags.append(make(code, self.span(child), f"unexpected indented line under {what}",
                                       hint or "only a line ending with ':' opens a block"))
                return

    def need_block(self, line: Line, what: str) -> None:
        """A line ending in ':' opens a block of deeper lines (docs/language.md §1.2): with none
        under it, the original finds a missing token (E002 -> P008, as for an empty 'budget:')."""
        if not line.children:
            raise self.err("P008", self.end_span(line), f"{what} opens a block, but no line is indented under it",
                           "write its lines below it, indented, or remove it")

    def each_child(self, line: Line) -> list[Line]:
        return [c for c in line.children if not c.broken]

    def each_parsed(self, line: Line, parse: Callable[[Line], _T]) -> list[_T]:
        """Each child line through ``parse``; one that does not parse is reported and skipped,
        so a bad line costs that line, not its block."""
        out: list[_T] = []
        for child in self.each_child(line):
            try:
                out.append(parse(child))
            except _Error as err:
                self.diags.append(err.diag)
        return out

    def properties(self, line: Line, allowed: tuple[str, ...] | None, owner: str) -> tuple[ast.Property, ...]:
        return tuple(self.each_parsed(line, lambda child: self.property(child, allowed, owner)))

    def header(self, line: Line, keyword: str, named: bool) -> tuple[str | None, Span | None]:
        """``keyword NAME:`` (named) or ``keyword:`` -> the name; the line must end with ':'."""
        pos = 1
        name: str | None = None
        name_span: Span | None = None
        if named:
            t, pos = self.expect_name(line, pos, f"a name after '{keyword}'")
            name, name_span = str(t.value), _tok_span(self.file, t)
        pos = self.expect_punct(line, pos, ":", f"'{keyword}{' ' + name if name else ''}'")
        self.expect_end(line, pos, f"'{keyword}{' ' + name if name else ''}:'")
        if name in TERMINAL_NAMES and keyword in ("prompt", "schema", "cursor") and name_span is not None:
            # docs/language.md §7: a prompt, schema or cursor named done/fail is the original's E011, like a node
            raise self.err("C042", name_span, f"a {keyword} cannot be named '{name}': it is a built-in terminal",
                           f"rename it, e.g. {keyword} {name}_{keyword}:")
        return name, name_span

    # --- values -------------------------------------------------------------------------------

    def value(self, line: Line, pos: int, depth: int = 0) -> tuple[ast.Value, int]:
        toks = line.tokens
        if depth > _MAX_NESTING:
            raise self.err("P008", _tok_span(self.file, toks[pos]) if pos < len(toks) else self.end_span(line),
                           f"value nested more than {_MAX_NESTING} levels deep")
        if pos >= len(toks):
            raise self.err("P008", self.end_span(line), "expected a value")
        t = toks[pos]
        sp = _tok_span(self.file, t)
        if t.kind == STRING or t.kind == INT or t.kind == FLOAT:
            return ast.Literal(t.value, sp), pos + 1  # type: ignore[arg-type]
        if t.kind == IDENT:
            if t.value == "true":
                return ast.Literal(True, sp), pos + 1
            if t.value == "false":
                return ast.Literal(False, sp), pos + 1
            if t.value == "null":
                return ast.Literal(None, sp), pos + 1
            return ast.Ident(str(t.value), sp), pos + 1
        if t.kind == DOTTED:  # a tool reference such as mcp.github.get_issue or mcp.github.*
            return ast.Ident(str(t.value), sp), pos + 1
        if t.is_punct("["):
            items: list[ast.Value] = []
            pos += 1
            while True:
                if pos < len(toks) and toks[pos].is_punct("]"):
                    trailing = bool(items) and toks[pos - 1].is_punct(",")
                    return ast.ListValue(tuple(items), sp, trailing), pos + 1
                item, pos = self.value(line, pos, depth + 1)
                items.append(item)
                if pos < len(toks) and toks[pos].is_punct(","):
                    pos += 1
                    continue
                if pos < len(toks) and toks[pos].is_punct("]"):
                    continue
                raise self._expected(line, pos, "',' or ']' in the list")
        if t.is_punct("{"):
            entries: list[ast.MapEntry] = []
            pos += 1
            while True:
                if pos < len(toks) and toks[pos].is_punct("}"):
                    return ast.MapValue(tuple(entries), sp), pos + 1
                if pos >= len(toks) or toks[pos].kind not in (IDENT, STRING):
                    raise self._expected(line, pos, "a key in the map")
                k = toks[pos]
                pos = self.expect_punct(line, pos + 1, ":", f"map key '{k.value}'")
                v, pos = self.value(line, pos, depth + 1)
                entries.append(ast.MapEntry(str(k.value), v, _tok_span(self.file, k)))
                if pos < len(toks) and toks[pos].is_punct(","):
                    pos += 1
                    continue
                if pos < len(toks) and toks[pos].is_punct("}"):
                    continue
                if pos < len(toks) and toks[pos].line > toks[pos - 1].line:
                    continue  # "separated by commas and/or newlines" (docs/language.md §3)
                raise self._expected(line, pos, "',' or '}' in the map")
        raise self.err("P008", sp, f"expected a value, found {_describe(t)}")

    def _expected(self, line: Line, pos: int, what: str) -> _Error:
        if pos >= len(line.tokens):
            return self.err("P008", self.end_span(line), f"expected {what}")
        t = line.tokens[pos]
        return self.err("P008", _tok_span(self.file, t), f"expected {what}, found {_describe(t)}")

    def property(self, line: Line, allowed: tuple[str, ...] | None, owner: str) -> ast.Property:
        """``name: value``, ``name:`` + nested block, or ``script:`` + raw body."""
        if allowed is None and line.tokens and line.tokens[0].kind == STRING:
            t, pos = line.tokens[0], 1  # a quoted key in a free-form block (cursor bands: "0.0..0.4": "...")
        else:
            t, pos = self.expect_ident(line, 0, "a property name")
        name = str(t.value)
        sp = _tok_span(self.file, t)
        if allowed is not None and name not in allowed:
            raise self.err("P007", sp, f"unknown property '{name}' in {owner}", suggest(name, allowed))
        pos = self.expect_punct(line, pos, ":", f"property '{name}'")
        if line.raw is not None:
            return ast.Property(name, line.raw, sp)
        if pos == len(line.tokens):
            if not line.children:
                raise self.err("P008", self.end_span(line), f"property '{name}' has no value")

            return ast.Property(name, self.generic_block(line, f"'{name}' in {owner}"), sp)
        val, pos = self.value(line, pos)
        self.expect_end(line, pos, f"the value of '{name}'")
        self.no_children(line, f"'{name}'")
        return ast.Property(name, val, sp)

    def generic_block(self, line: Line, owner: str) -> ast.Block:
        return ast.Block(self.properties(line, None, owner), self.span(line))

    def type_ref(self, line: Line, pos: int) -> tuple[ast.TypeRef, int]:
        t, pos = self.expect_ident(line, pos, "a type")
        name = str(t.value)
        toks = line.tokens
        if pos + 1 < len(toks) and toks[pos].is_punct("[") and toks[pos + 1].is_punct("]"):
            if not (toks[pos].line == t.line == toks[pos + 1].line and toks[pos].col == t.col + len(t.text)
                    and toks[pos + 1].col == toks[pos].col + 1):
                # "`string[]` is one token" (docs/language.md 1)
                raise self.err("P008", _tok_span(self.file, toks[pos]), f"'{name}[]' is written without spaces",
                               f"write {name}[]")
            name += "[]"
            pos += 2
        return ast.TypeRef(name, _tok_span(self.file, t)), pos

    # --- declarations -------------------------------------------------------------------------

    def top_level(self, line: Line) -> ast.Decl | None:
        first = line.tokens[0]
        if len(line.tokens) > 1 and line.tokens[1].is_punct("->"):
            raise self.err("P006", _tok_span(self.file, first), "an edge outside the workflow",
                           "edges go inside 'workflow NAME:', indented by two spaces")
        if first.kind != IDENT or str(first.value) not in TOP_LEVEL_KEYWORDS:
            word = first.text
            raise self.err("P006", _tok_span(self.file, first), f"unknown keyword {word!r} at the top level",
                           suggest(word, TOP_LEVEL_KEYWORDS) if first.kind == IDENT else
                           "a declaration starts with a keyword such as 'agent' or 'workflow'")
        kw = str(first.value)
        if kw == "vars":
            self.header(line, kw, named=False)
            self.need_block(line, "'vars:'")
            return ast.VarsDecl(tuple(self.var_lines(line)), self.span(line))
        if kw == "presets":
            return self.presets(line)
        if kw == "attachments":
            return self.attachments(line)
        if kw == "prompt":
            name, _ = self.header(line, kw, named=True)
            if name in KEYWORDS:
                raise self.err("P008", _tok_span(self.file, line.tokens[1]),
                               f"a prompt cannot be named {name!r}: it is a keyword",
                               f"rename it, e.g. prompt {name}_prompt:")
            if line.raw is None or not line.raw.text.strip():
                # at least one body line (docs/language.md §1.5); a trailing comment on the header line
                # keeps the lines below from being read as the body (as observed)
                at = self.span(line.children[0]) if line.children else self.end_span(line)
                raise self.err("P008", at, f"prompt '{name}' has no body",
                               "write its text on the following, indented lines (a comment after "
                               "'prompt NAME:' stops them being read as the body)")
            return ast.PromptDecl(str(name), line.raw, self.span(line))
        if kw == "schema":
            return self.schema(line)
        if kw in NODE_KINDS:
            return self.node(line, kw)
        if kw == "import":
            if len(line.tokens) < 2 or line.tokens[1].kind != STRING:
                raise self._expected(line, 1, 'a quoted path after import, e.g. import "lib/common.bot"')
            self.expect_end(line, 2, "the import path")
            self.no_children(line, "import")
            return ast.ImportDecl(str(line.tokens[1].value), self.span(line))
        if kw == "workflow":
            return self.workflow(line)
        if kw in NAMED_EXTENSIONS:
            name, _ = self.header(line, kw, named=True)
            self.need_block(line, f"'{kw} {name}:'")
            return ast.ExtensionDecl(kw, name, self.generic_block(line, f"{kw} '{name}'"), self.span(line))
        # BLOCK_EXTENSIONS: `sandbox: value` or `sandbox:` + block
        prop = self.property(line, None, "the file")
        return ast.ExtensionDecl(kw, None, prop.value, self.span(line))

    def var_lines(self, line: Line) -> list[ast.VarDecl]:
        return self.each_parsed(line, self.var_line)

    def var_line(self, child: Line) -> ast.VarDecl:
        t, pos = self.expect_ident(child, 0, "a var name")
        pos = self.expect_punct(child, pos, ":", f"var '{t.value}'")
        typ, pos = self.type_ref(child, pos)
        default: ast.Value | None = None
        if pos < len(child.tokens):
            if not child.tokens[pos].is_punct("="):
                raise self._expected(child, pos, f"'= default' after the type of var '{t.value}'")
            default, pos = self.value(child, pos + 1)
            self.expect_end(child, pos, f"the default of var '{t.value}'")
        self.no_children(child, f"var '{t.value}'")
        return ast.VarDecl(str(t.value), typ, default, _tok_span(self.file, t))

    def presets(self, line: Line) -> ast.PresetsDecl:
        self.header(line, "presets", named=False)
        self.need_block(line, "'presets:'")
        return ast.PresetsDecl(tuple(self.each_parsed(line, self.preset)), self.span(line))

    def preset(self, child: Line) -> ast.PresetDecl:
        t, pos = self.expect_ident(child, 0, "a preset name")
        pos = self.expect_punct(child, pos, ":", f"preset '{t.value}'")
        self.expect_end(child, pos, f"preset '{t.value}:'")
        self.need_block(child, f"preset '{t.value}:'")
        values = self.properties(child, None, f"preset '{t.value}'")
        return ast.PresetDecl(str(t.value), values, _tok_span(self.file, t))

    def attachments(self, line: Line) -> ast.AttachmentsDecl:
        self.header(line, "attachments", named=False)
        self.need_block(line, "'attachments:'")
        return ast.AttachmentsDecl(tuple(self.each_parsed(line, self.attachment)), self.span(line))

    def attachment(self, child: Line) -> ast.AttachmentDecl:
        t, pos = self.expect_ident(child, 0, "an attachment name")
        pos = self.expect_punct(child, pos, ":", f"attachment '{t.value}'")
        kind, pos = self.expect_ident(child, pos, "the attachment kind (file or image)")
        self.expect_end(child, pos, f"attachment '{t.value}: {kind.value}'")
        props = self.properties(child, ATTACHMENT_PROPERTIES, f"attachment '{t.value}'")
        return ast.AttachmentDecl(str(t.value), ast.Ident(str(kind.value), _tok_span(self.file, kind)),
                                  props, _tok_span(self.file, t))

    def schema(self, line: Line) -> ast.SchemaDecl:
        name, _ = self.header(line, "schema", named=True)
        self.need_block(line, f"'schema {name}:'")
        return ast.SchemaDecl(str(name), tuple(self.each_parsed(line, self.schema_field)), self.span(line))

    def schema_field(self, child: Line) -> ast.SchemaFieldDecl:
        t, pos = self.expect_ident(child, 0, "a field name")
        pos = self.expect_punct(child, pos, ":", f"field '{t.value}'")
        typ, pos = self.type_ref(child, pos)
        enum: ast.EnumSpec | None = None
        toks = child.tokens
        if pos < len(toks):
            if not (toks[pos].is_punct("[") and pos + 1 < len(toks) and toks[pos + 1].is_ident("enum")):
                raise self._expected(child, pos, f"'[enum: ...]' or the end of field '{t.value}'")
            esp = _tok_span(self.file, toks[pos])
            pos = self.expect_punct(child, pos + 2, ":", "'enum'")
            values: list[ast.Literal] = []
            while True:
                v, pos = self.value(child, pos)
                if not isinstance(v, (ast.Literal, ast.Ident)):
                    raise self.err("P008", v.span, "enum values are strings")
                values.append(v if isinstance(v, ast.Literal) else ast.Literal(v.name, v.span))
                if pos < len(toks) and toks[pos].is_punct(","):
                    pos += 1
                    continue
                pos = self.expect_punct(child, pos, "]", "the enum values")
                break
            enum = ast.EnumSpec(tuple(values), esp)
            self.expect_end(child, pos, f"field '{t.value}'")
        self.no_children(child, f"field '{t.value}'")
        return ast.SchemaFieldDecl(str(t.value), typ, enum, _tok_span(self.file, t))

    def node(self, line: Line, kind: str) -> ast.NodeDecl:
        name, name_span = self.header(line, kind, named=True)
        self.need_block(line, f"'{kind} {name}:'")
        props = self.properties(line, NODE_PROPERTIES[kind], f"{kind} '{name}'")
        assert name is not None and name_span is not None
        return ast.NodeDecl(kind, name, name_span, props, self.span(line))

    def workflow(self, line: Line) -> ast.WorkflowDecl:
        name, _ = self.header(line, "workflow", named=True)
        self.need_block(line, f"'workflow {name}:'")
        owner = f"workflow '{name}'"
        props: list[ast.Property] = []
        wvars: list[ast.VarDecl] = []
        watts: list[ast.AttachmentDecl] = []
        edges: list[ast.EdgeDecl] = []
        vars_line: int | None = None
        for child in self.each_child(line):
            try:
                toks = child.tokens
                if len(toks) >= 2 and toks[1].is_punct("->"):
                    if toks[0].kind == IDENT and str(toks[0].value) in WORKFLOW_BODY_KEYWORDS:
                        raise self.err("P008", _tok_span(self.file, toks[0]),
                                       f"an edge cannot start with {toks[0].value!r}: it is a workflow keyword",
                                       "rename the node")
                    edges.append(self.edge(child))
                elif toks[0].is_ident("vars") and len(toks) >= 2 and toks[1].is_punct(":"):
                    self.header(child, "vars", named=False)
                    self.need_block(child, "'vars:'")
                    if vars_line is not None:
                        # "a second vars: block in the body replaces the first (as observed)" (docs/language.md 2)
                        self.diags.append(make("C105", self.span(child), f"{owner} has a second vars: block; it "
                                               f"replaces the one at line {vars_line}", "merge them into one block",
                                               severity=Severity.WARNING))
                    vars_line = child.line
                    wvars = self.var_lines(child)
                elif toks[0].is_ident("attachments") and len(toks) >= 2 and toks[1].is_punct(":"):
                    watts.extend(self.attachments(child).attachments)
                elif toks[0].kind == IDENT and (len(toks) < 2 or not toks[1].is_punct(":")):
                    raise self.err("P006", _tok_span(self.file, toks[0]),
                                   f"unknown statement in {owner}: expected a property 'name: value' or an edge 'a -> b'",
                                   suggest(str(toks[0].value), (*WORKFLOW_PROPERTIES, "vars")))
                elif toks[0].kind == IDENT and str(toks[0].value) not in (*WORKFLOW_PROPERTIES, "vars"):
                    # docs/language.md §7: an unknown keyword in the workflow body is P006 (P007 is for the
                    # properties of nodes and of the blocks nested in them)
                    raise self.err("P006", _tok_span(self.file, toks[0]),
                                   f"unknown keyword {toks[0].value!r} in {owner}",
                                   suggest(str(toks[0].value), (*WORKFLOW_PROPERTIES, "vars")))
                else:
                    props.append(self.property(child, (*WORKFLOW_PROPERTIES, "vars"), owner))
            except _Error as err:
                self.diags.append(err.diag)
        return ast.WorkflowDecl(str(name), tuple(props), tuple(wvars), tuple(edges), self.span(line),
                                attachments=tuple(watts))

    def edge(self, line: Line) -> ast.EdgeDecl:
        toks = line.tokens
        src_t, _ = self.expect_name(line, 0, "the edge source")
        dst_t, pos = self.expect_name(line, 2, "the edge target after '->'")
        when: ast.WhenClause | None = None
        loop: ast.LoopClause | None = None
        with_map: ast.MapValue | None = None
        while pos < len(toks):
            t = toks[pos]
            sp = _tok_span(self.file, t)
            if t.is_ident("when") and when is None:
                pos += 1
                if pos < len(toks) and toks[pos].is_ident("not"):
                    f, pos = self.expect_ident(line, pos + 1, "a bool field after 'when not'")
                    when = ast.WhenClause("not_field", str(f.value), None, sp)
                elif pos < len(toks) and toks[pos].kind == STRING:
                    s = toks[pos]
                    when = ast.WhenClause("expr", None, ast.Literal(str(s.value), _tok_span(self.file, s)), sp)
                    pos += 1
                else:
                    f, pos = self.expect_ident(line, pos, 'a bool field or a quoted expression after \'when\'')
                    when = ast.WhenClause("field", str(f.value), None, sp)
            elif t.is_ident("as") and loop is None:
                lname, pos = self.expect_ident(line, pos + 1, "a loop name after 'as'")
                pos = self.expect_punct(line, pos, "(", f"loop name '{lname.value}'")
                if pos >= len(toks) or toks[pos].kind not in (INT, STRING):
                    raise self._expected(line, pos, f"the loop bound (an integer or a quoted \"{{{{ref}}}}\") "
                                                    f"in '{lname.value}(N)'")
                bound = toks[pos].value
                assert isinstance(bound, (int, str))  # INT tokens hold an int, STRING tokens a str
                pos = self.expect_punct(line, pos + 1, ")", "the loop bound")
                loop = ast.LoopClause(str(lname.value), bound, _tok_span(self.file, lname))
            elif t.is_ident("with") and with_map is None:
                if pos + 1 >= len(toks) or not toks[pos + 1].is_punct("{"):
                    raise self._expected(line, pos + 1, "'{' after 'with'")
                v, pos = self.value(line, pos + 1)
                assert isinstance(v, ast.MapValue)
                with_map = v
            else:
                dup = t.kind == IDENT and str(t.value) in ("when", "as", "with")
                raise self.err("P008", sp, f"{'duplicate' if dup else 'unexpected'} {_describe(t)} in edge",
                               "an edge is: SRC -> DST [when COND] [as LOOP(N)] [with { key: \"template\" }]")
        # "a clause on the next line" is a missing or wrong token, P008 (docs/language.md §7)
        self.no_children(line, "an edge", "P008", "an edge is one line: write its when/as/with clauses after "
                         "the target (only a with { } map may continue on the following lines)")
        return ast.EdgeDecl(ast.Ident(str(src_t.value), _tok_span(self.file, src_t)),
                            ast.Ident(str(dst_t.value), _tok_span(self.file, dst_t)),
                            when, loop, with_map, self.span(line))

