"""Lexer: source text -> logical lines of tokens, with indentation and raw blocks.

The language is line-oriented: a logical line is one physical line, or several while a
``[``, ``{`` or ``(`` is open. Comment lines (``##``) and blank lines vanish. The body of
``prompt NAME:``, of ``script:`` and of an in-place ``system:``/``user:``/``instructions:`` is raw text (``##`` there is a markdown heading, not a
comment), so the lexer captures it whole and hands it to the header line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from sys import intern
from typing import NoReturn

from iterion.dsl.ast import RawText
from iterion.dsl.diagnostics import Diagnostic, make
from iterion.expr import is_ident_start
from iterion.ir import Span

IDENT = "ident"
STRING = "string"
INT = "int"
FLOAT = "float"
PUNCT = "punct"

# Properties whose indented body is raw text: a script, or a prompt written in place.
RAW_PROPERTIES = ("script", "system", "user", "instructions")
_TOKEN = re.compile(r"""
    (?P<ws>[ ]+)
  | (?P<comment>\#\#.*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<arrow>->)
  | (?P<punct>[:=,\[\]{}()])
""", re.VERBOSE)
_OPEN = {"[": "]", "{": "}", "(": ")"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    value: object  # str for ident/string/punct, int, float
    line: int
    col: int  # 1-based
    text: str  # the source text of the token

    def is_punct(self, p: str) -> bool:
        return self.kind == PUNCT and self.value == p

    def is_ident(self, name: str | None = None) -> bool:
        return self.kind == IDENT and (name is None or self.value == name)


@dataclass(slots=True)
class Line:
    indent: int
    tokens: list[Token]
    line: int
    col: int  # column of the first token
    raw: RawText | None = None  # the raw body following this header line
    broken: bool = False  # a lexing error was reported; the parser skips it silently
    children: list[Line] = field(default_factory=list)


class _LineError(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        self.diag = diag


def _is_raw_header(tokens: list[Token], indent: int) -> bool:
    if len(tokens) == 3 and indent == 0 and tokens[0].is_ident("prompt") and tokens[1].kind == IDENT \
            and tokens[2].is_punct(":"):
        return True
    return (len(tokens) == 2 and indent > 0 and tokens[0].kind == IDENT and tokens[0].value in RAW_PROPERTIES
            and tokens[1].is_punct(":"))


class _Scanner:
    def __init__(self, file: str, lines: list[str]) -> None:
        self.file = file
        self.lines = lines

    def span(self, line: int, col: int) -> Span:
        return Span(self.file, line, col)

    def scan_line(self, idx: int, start: int, tokens: list[Token], stack: list[tuple[str, int, int]]) -> None:
        """Tokenize physical line ``idx`` from column ``start`` (0-based); updates the bracket stack."""
        text = self.lines[idx]
        lineno = idx + 1
        i = start
        n = len(text)
        match = _TOKEN.match
        while i < n:
            m = match(text, i)
            if m is None:
                self._bad_char(text, i, lineno)
            kind = m.lastgroup
            j = m.end()
            col = i + 1
            if kind == "ws":
                pass
            elif kind == "comment":
                return  # a trailing comment
            elif kind == "ident":
                word = intern(m.group())  # keywords and names repeat: one string each, and one per token
                tokens.append(Token(IDENT, word, lineno, col, word))
            elif kind == "string":
                quoted = m.group()
                tokens.append(Token(STRING, self._unescape(quoted, lineno, col), lineno, col, quoted))
            elif kind == "number":
                tokens.append(self._number(text, m.group(), j, lineno, col))
            elif kind == "arrow":
                tokens.append(Token(PUNCT, "->", lineno, col, "->"))
            else:  # punct
                c = m.group()
                if c in _OPEN:
                    stack.append((c, lineno, col))
                elif c in ")]}":
                    if not stack or _OPEN[stack[-1][0]] != c:
                        raise _LineError(make("P008", self.span(lineno, col), f"unexpected '{c}'",
                                              "check that brackets are balanced"))
                    stack.pop()
                tokens.append(Token(PUNCT, c, lineno, col, c))
            i = j

    def _bad_char(self, text: str, i: int, lineno: int) -> NoReturn:
        c = text[i]
        if c == '"':
            raise _LineError(make("P004", self.span(lineno, i + 1), "unterminated string: missing closing '\"'",
                                  "strings are double-quoted and end on the same line"))
        if c == "\t":
            raise _LineError(make("P003", self.span(lineno, i + 1), "tab character; use spaces",
                                  "indent with two spaces per level"))
        what = "'#' (comments start with '##')" if c == "#" else repr(c)
        raise _LineError(make("P003", self.span(lineno, i + 1), f"unexpected character {what}",
                              "comments start with '##'" if c == "#" else None))

    def _number(self, text: str, src: str, end: int, lineno: int, col: int) -> Token:
        if len(src) > 64:  # int() refuses huge literals; no real value is this long
            raise _LineError(make("P008", self.span(lineno, col), f"number with {len(src)} characters is too long"))
        if end < len(text) and is_ident_start(text[end]):
            raise _LineError(make("P008", self.span(lineno, col), f"malformed number '{src}{text[end]}'",
                                  'quote it if it is a string, e.g. "30m"'))
        if any(ch in src for ch in ".eE"):
            return Token(FLOAT, float(src), lineno, col, src)
        return Token(INT, int(src), lineno, col, src)

    def _unescape(self, quoted: str, lineno: int, col: int) -> str:
        body = quoted[1:-1]
        if "\\" not in body:
            return body
        out: list[str] = []
        j = 0
        while j < len(body):
            c = body[j]
            if c == "\\":
                e = body[j + 1]  # the token pattern guarantees a character after a backslash
                if e not in _ESCAPES:
                    raise _LineError(make("P009", self.span(lineno, col + 1 + j), f"unknown escape '\\{e}' in string",
                                          'the escapes are \\" \\\\ \\n \\t \\r'))
                out.append(_ESCAPES[e])
                j += 2
            else:
                out.append(c)
                j += 1
        return "".join(out)


def _continues(text: str, indent: int) -> bool:
    stripped = text.strip()
    if not stripped:
        return False
    return _leading_spaces(text) > indent or stripped[0] in ")]}"


def _leading_spaces(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def physical_lines(text: str) -> list[str]:
    """The lines of a source file, whatever its line endings (CRLF, CR or LF)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def tokenize(text: str, file: str) -> tuple[list[Line], list[Diagnostic]]:
    """Split ``text`` into logical lines (flat, in order). Errors never raise: they are returned."""
    diags: list[Diagnostic] = []
    return list(iter_lines(text, file, diags)), diags


def iter_lines(text: str, file: str, diags: list[Diagnostic]) -> Iterator[Line]:
    """``tokenize`` one logical line at a time (diagnostics appended to ``diags``): the parser
    consumes each top-level block as it completes, so the tokens of a whole file are never
    held at once (peak memory stays linear in the source, with a small factor)."""
    phys = physical_lines(text)
    sc = _Scanner(file, phys)
    idx = 0
    total = len(phys)
    while idx < total:
        raw_line = phys[idx]
        stripped = raw_line.strip(" ")
        if stripped == "" or stripped.startswith("##"):
            idx += 1
            continue
        lead = raw_line[: len(raw_line) - len(raw_line.lstrip(" \t"))]
        indent = len(lead)
        if "\t" in lead:
            diags.append(make("P002", Span(file, idx + 1, lead.index("\t") + 1),
                              "tab character in indentation", "indent with two spaces per level"))
            yield Line(indent, [], idx + 1, indent + 1, broken=True)
            idx += 1
            continue
        start_idx = idx
        tokens: list[Token] = []
        stack: list[tuple[str, int, int]] = []
        try:
            sc.scan_line(idx, indent, tokens, stack)
            # an open bracket continues onto lines indented deeper, or starting with a closer;
            # anything else is a new statement, so a forgotten ']' costs one line, not the file
            while stack and idx + 1 < total and _continues(phys[idx + 1], indent):
                idx += 1
                sc.scan_line(idx, 0, tokens, stack)
            if stack:
                br, bl, bc = stack[-1]
                raise _LineError(make("P005", Span(file, bl, bc), f"'{br}' is never closed",
                                      f"add the matching '{_OPEN[br]}'"))
        except _LineError as err:
            diags.append(err.diag)
            yield Line(indent, [], start_idx + 1, indent + 1, broken=True)
            idx += 1
            continue
        idx += 1
        line = Line(indent, tokens, start_idx + 1, indent + 1)
        if _is_raw_header(tokens, indent):
            line.raw, idx = _raw_block(phys, idx, indent, file)
        yield line


def _raw_block(phys: list[str], idx: int, header_indent: int, file: str) -> tuple[RawText, int]:
    """Collect the lines indented deeper than the header (blank lines included)."""
    body: list[str] = []
    first = idx
    while idx < len(phys):
        ln = phys[idx]
        if ln.strip() == "":
            body.append("")
            idx += 1
            continue
        if _leading_spaces(ln) <= header_indent and not ln.startswith("\t"):
            break
        body.append(ln)
        idx += 1
    while body and body[-1] == "":
        body.pop()  # trailing blank lines separate declarations; they are not the body's
    idents = [_leading_spaces(b.expandtabs(2)) for b in body if b.strip()]
    common = min(idents) if idents else header_indent + 2
    lines = [b.expandtabs(2)[common:] if b.strip() else "" for b in body]
    # the text starts at the first non-blank line, and so does its span
    first_text = next((i for i, b in enumerate(body) if b.strip()), 0)
    span = Span(file, first + first_text + 1, common + 1)
    text = "\n".join(lines[first_text:])
    return RawText(text, span, common), (first + len(body)) if body else idx
