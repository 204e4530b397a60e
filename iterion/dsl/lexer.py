"""Lexer: source text -> logical lines of tokens, with indentation and raw blocks.

The language is line-oriented: a logical line is one physical line, or several while a
``[``, ``{`` or ``(`` is open, a backtick string is open, or a double-quoted string continues
after a backslash at a line end. Comment lines (``##``) and blank lines vanish. The body of
``prompt NAME:``, of ``script:`` and of an in-place ``system:``/``user:``/``instructions:`` is raw text (``##`` there is a markdown heading, not a
comment), so the lexer captures it whole and hands it to the header line; so is a block
scalar ``key: |`` (docs/language.md §1.4).

Strings (docs/language.md §1.4): in a double-quoted string a backslash is kept verbatim with the next
character (the pair never ends the string) unless the file opens with a
``## strict-escape: on`` comment, which decodes ``\" \\ \n \t \r \0`` (others: P009).
Backtick strings are raw, newlines included. Names may be dotted paths ending in ``.*``
(tool references ``mcp.server.tool``, ``mcp.server.*``, ``board.read``): one DOTTED token.
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
DOTTED = "dotted"  # a dotted name (list items only): mcp.github.get_issue, mcp.github.*, board.read

# Properties whose indented body is raw text: a script, or a prompt written in place.
RAW_PROPERTIES = ("script", "system", "user", "instructions")
_TOKEN = re.compile(r"""
    (?P<ws>[ \t]+)
  | (?P<comment>\#\#.*)
  | (?P<ident>[^\W\d]\w*(?:\.[^\W\d]\w*)*(?:\.\*)?)
  | (?P<number>[0-9]+(?:\.[0-9]+)?)
  | (?P<arrow>->)
  | (?P<punct>[:=,\[\]{}()])
""", re.VERBOSE)
_OPEN = {"[": "]", "{": "}", "(": ")"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "0": "\0"}
_STRICT = re.compile(r"^\s*##\s*strict-escape\s*(?::|=)\s*on\s*$")


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
    def __init__(self, diag: Diagnostic, resume: int | None = None) -> None:
        self.diag = diag
        self.resume = resume  # the physical line index to go on from (None: the next line)


def _is_raw_header(tokens: list[Token], indent: int) -> bool:
    if len(tokens) == 3 and indent == 0 and tokens[0].is_ident("prompt") and tokens[1].kind == IDENT \
            and tokens[2].is_punct(":"):
        return True
    return (len(tokens) == 2 and indent > 0 and tokens[0].kind == IDENT and tokens[0].value in RAW_PROPERTIES
            and tokens[1].is_punct(":"))


class _Scanner:
    def __init__(self, file: str, lines: list[str], strict: bool = False) -> None:
        self.file = file
        self.lines = lines
        self.strict = strict  # `## strict-escape: on`: double-quoted strings decode escapes

    def span(self, line: int, col: int) -> Span:
        return Span(self.file, line, col)

    def scan_line(self, idx: int, start: int, tokens: list[Token], stack: list[tuple[str, int, int]]) -> int:
        """Tokenize physical line ``idx`` from column ``start`` (0-based); updates the bracket stack.

        Returns the index of the last physical line consumed: a backtick string, or a quoted
        string continued by a backslash at a line end, goes on over the following lines."""
        text = self.lines[idx]
        lineno = idx + 1
        i = start
        n = len(text)
        match = _TOKEN.match
        while i < n:
            c = text[i]
            if c == '"' or c == "`":
                tok, idx, i = self._string(idx, i) if c == '"' else self._raw_string(idx, i)
                tokens.append(tok)
                text = self.lines[idx]
                lineno = idx + 1
                n = len(text)
                continue
            if c == "|":
                self._block_marker(text, i, lineno, tokens)
                return idx
            m = match(text, i)
            if m is None:
                self._bad_char(text, i, lineno)
            kind = m.lastgroup
            j = m.end()
            col = i + 1
            if kind == "ws":
                pass
            elif kind == "comment":
                return idx  # a trailing comment
            elif kind == "ident":
                word = intern(m.group())  # keywords and names repeat: one string each, and one per token
                tokens.append(Token(DOTTED if "." in word else IDENT, word, lineno, col, word))
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
        return idx

    def _block_marker(self, text: str, i: int, lineno: int, tokens: list[Token]) -> None:
        """``|`` right after a property's colon, then only spaces and an optional comment."""
        rest = text[i + 1:].strip(" \t")
        if len(tokens) == 2 and tokens[0].kind == IDENT and tokens[1].is_punct(":") and (rest == "" or rest.startswith("##")):
            tokens.append(Token(PUNCT, "|", lineno, i + 1, "|"))
            return
        raise _LineError(make("P003", self.span(lineno, i + 1), "unexpected character '|'",
                              "a block scalar is 'key: |' with the text on the following, deeper lines"))

    def _string(self, idx: int, i: int) -> tuple[Token, int, int]:
        """A double-quoted string opening at (``idx``, ``i``) -> (token, last line index, end offset)."""
        line0, col0 = idx + 1, i + 1
        text = self.lines[idx]
        j = i + 1
        out: list[str] = []
        raw: list[str] = ['"']
        while True:
            if j >= len(text):
                raise _LineError(make("P004", self.span(line0, col0), "unterminated string: missing closing '\"'",
                                      "a double-quoted string ends on its line; use a `backtick` string or "
                                      "a block scalar 'key: |' for several lines"))
            c = text[j]
            if c == '"':
                raw.append('"')
                value = "".join(out)
                return Token(STRING, value, line0, col0, "".join(raw)), idx, j + 1
            if c != "\\":
                out.append(c)
                raw.append(c)
                j += 1
                continue
            if j + 1 >= len(text):  # a backslash at the line end: the newline is part of the string
                if self.strict:
                    raise _LineError(make("P009", self.span(idx + 1, j + 1), "a backslash at the end of the line "
                                          "is not an escape in strict-escape mode",
                                          'the escapes are \\" \\\\ \\n \\t \\r \\0'))
                if idx + 1 >= len(self.lines):
                    raise _LineError(make("P004", self.span(line0, col0), "unterminated string: missing closing '\"'"))
                out.append("\\\n")
                raw.append("\\\n")
                idx += 1
                text = self.lines[idx]
                j = 0
                continue
            e = text[j + 1]
            raw.append(c + e)
            if not self.strict:
                out.append(c + e)  # verbatim: the backslash and the next character are both kept
            elif e in _ESCAPES:
                out.append(_ESCAPES[e])
            else:
                raise _LineError(make("P009", self.span(idx + 1, j + 1), f"unknown escape '\\{e}' in string",
                                      'strict-escape mode decodes \\" \\\\ \\n \\t \\r \\0'))
            j += 2

    def _raw_string(self, idx: int, i: int) -> tuple[Token, int, int]:
        """A backtick string: everything up to the next backtick, newlines included, no escapes."""
        line0, col0 = idx + 1, i + 1
        parts: list[str] = []
        j = i + 1
        while True:
            text = self.lines[idx]
            k = text.find("`", j)
            if k >= 0:
                parts.append(text[j:k])
                value = "\n".join(parts)
                return Token(STRING, value, line0, col0, "`" + value + "`"), idx, k + 1
            parts.append(text[j:])
            idx += 1
            j = 0
            if idx >= len(self.lines):
                raise _LineError(make("P004", self.span(line0, col0), "unterminated raw string: missing closing '`'",
                                      "a backtick string ends at the next backtick"), resume=idx)

    def _bad_char(self, text: str, i: int, lineno: int) -> NoReturn:
        c = text[i]
        what = "'#' (comments start with '##')" if c == "#" else repr(c)
        hint = "comments start with '##'" if c == "#" else _bare_value_hint(text, i)
        raise _LineError(make("P003", self.span(lineno, i + 1), f"unexpected character {what}", hint))

    def _number(self, text: str, src: str, end: int, lineno: int, col: int) -> Token:
        if len(src) > 64:  # int() refuses huge literals; no real value is this long
            raise _LineError(make("P008", self.span(lineno, col), f"number with {len(src)} characters is too long"))
        if end < len(text) and is_ident_start(text[end]):
            raise _LineError(make("P008", self.span(lineno, col), f"malformed number '{src}{text[end]}'",
                                  'quote it if it is a string, e.g. "30m"'))
        value: int | float = float(src) if "." in src else int(src)
        if value > _MAX_INT or value == float("inf"):  # docs/language.md §1 "out of range: invalid value" (int64)
            raise _LineError(make("P008", self.span(lineno, col), f"number {src} is out of range",
                                  f"the largest number is {_MAX_INT}"))
        return Token(FLOAT if "." in src else INT, value, lineno, col, src)


_MAX_INT = 2**63 - 1  # the original's int64


def strict_escape(lines: list[str]) -> bool:
    """Does a comment line among those opening the file read ``## strict-escape: on``?"""
    for ln in lines:
        s = ln.strip(" \t")
        if not s:
            continue
        if not s.startswith("##"):
            return False
        if _STRICT.match(s):
            return True
    return False


def _blank_or_comment(text: str) -> bool:
    stripped = text.strip(" \t")
    return stripped == "" or stripped.startswith("##")


# `key: value` (a quoted key too) on one line: an entry of an open map, not a new statement
_MAP_ENTRY = re.compile(r"""\s*(?:[^\W\d]\w*|"[^"]*")[ \t]*:[ \t]*[^\s#]""")


def _continues(text: str, indent: int, opener: str) -> bool:
    stripped = text.strip()
    if not stripped:
        return False
    if _leading_spaces(text) > indent or stripped[0] in ")]}":
        return True
    return opener == "{" and _MAP_ENTRY.match(text) is not None


def _leading_spaces(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def physical_lines(text: str) -> list[str]:
    """The lines of a source file, whatever its line endings (CRLF, CR or LF); a leading byte
    order mark is dropped (docs/language.md §1.1)."""
    text = text.removeprefix("\ufeff")
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
    if len(phys) > 1 and phys[-1] == "":
        phys.pop()  # the text after the final newline is not a line
    sc = _Scanner(file, phys, strict_escape(phys))
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
            idx = sc.scan_line(idx, indent, tokens, stack)
            # an open bracket continues onto lines indented deeper, or starting with a closer, over
            # blank and comment lines; in a map (a `with { }` of several lines), also onto a
            # `key: value` line at any indentation (docs/language.md §1.2, §3.1: the original has
            # no indentation inside braces); anything else is a new statement, so a forgotten
            # ']' costs one line, not the file
            while stack and idx + 1 < total:
                nxt = idx + 1
                while nxt < total and _blank_or_comment(phys[nxt]):
                    nxt += 1
                if nxt >= total or not _continues(phys[nxt], indent, stack[-1][0]):
                    break
                idx = sc.scan_line(nxt, 0, tokens, stack)
            if stack:
                br, bl, bc = stack[-1]
                raise _LineError(make("P005", Span(file, bl, bc), f"'{br}' is never closed",
                                      f"add the matching '{_OPEN[br]}'"))
        except _LineError as err:
            diags.append(err.diag)
            yield Line(indent, [], start_idx + 1, indent + 1, broken=True)
            idx = err.resume + 1 if err.resume is not None else start_idx + 1
            continue
        idx += 1
        line = Line(indent, tokens, start_idx + 1, indent + 1)
        if tokens and tokens[-1].is_punct("|"):
            line.raw, idx = block_scalar(phys, idx, file)
        elif _is_raw_header(tokens, indent) and not (indent == 0 and "##" in phys[start_idx]):
            # a trailing comment on a `prompt NAME:` line stops its body being read as raw text
            # (as observed, docs/language.md §1.5): the lines below are then lexed and parsed as they are
            line.raw, idx, short = _raw_block(phys, idx, indent, file)
            if short is not None:
                diags.append(short)
        yield line


def block_scalar(phys: list[str], idx: int, file: str) -> tuple[RawText, int]:
    """The lines of a block scalar ``key: |`` starting at ``idx`` -> (text, next line index).

    The first non-blank line fixes the indentation stripped from every line (deeper indentation
    is kept); every line keeps its newline; blank lines inside and after the content are empty
    lines; ``##`` lines are content. The block ends at the first non-blank line indented less
    than the first content line, or at the end of the file."""
    out: list[str] = []
    ind: int | None = None
    j = idx
    while j < len(phys):
        ln = phys[j]
        if ln.strip(" \t") == "":
            out.append("")
            j += 1
            continue
        # a tab may indent a block scalar (docs/language.md §1): it counts as one column, as a space does,
        # so tab-indented content ends at the next line indented less, not at the end of the file
        lead = len(ln) - len(ln.lstrip(" \t"))
        if ind is None:
            ind = lead
        elif lead < ind:
            break
        out.append(ln[ind:])
        j += 1
    if ind is None:  # no content: an empty string, and the blank lines stay blank lines
        return RawText("", Span(file, idx + 1, 1), 0), idx
    return RawText("".join(x + "\n" for x in out), Span(file, idx + 1, ind + 1), ind), j


def _raw_block(phys: list[str], idx: int, header_indent: int, file: str) -> tuple[RawText, int, Diagnostic | None]:
    """The raw body under a header line -> (text, next line index, P001 or None).

    The first body line fixes the body's indentation; deeper lines keep their extra spaces; a
    line indented less ends the body (docs/language.md §1.5). Blank lines inside are kept. A line
    that ends the body while still deeper than the header belongs to no block: P001 there, and
    the lines that follow it at that depth are skipped with it (one mistake, one message)."""
    body: list[str] = []
    first = idx
    ind: int | None = None
    short: Diagnostic | None = None
    while idx < len(phys):
        ln = phys[idx]
        if ln.strip() == "":
            body.append("")
            idx += 1
            continue
        lead = _leading_spaces(ln.expandtabs(2))
        if lead <= header_indent and not ln.startswith("\t"):
            break
        if ind is None:
            ind = lead
        elif lead < ind:
            short = make("P001", Span(file, idx + 1, lead + 1),
                         f"this line is indented less than the first line of the body above ({lead} spaces, "
                         f"not {ind}), so the body ends before it",
                         f"indent every line of the body by at least {ind} spaces")
            while idx < len(phys) and (phys[idx].strip() == "" or _leading_spaces(phys[idx]) > header_indent
                                       or phys[idx].startswith("\t")):
                idx += 1
            break
        body.append(ln)
        idx += 1
    while body and body[-1] == "":
        body.pop()  # trailing blank lines separate declarations; they are not the body's
    common = ind if ind is not None else header_indent + 2
    lines = [b.expandtabs(2)[common:] if b.strip() else "" for b in body]
    # the text starts at the first non-blank line, and so does its span
    first_text = next((i for i, b in enumerate(body) if b.strip()), 0)
    span = Span(file, first + first_text + 1, common + 1)
    text = "\n".join(lines[first_text:])
    if short is not None:
        return RawText(text, span, common), idx, short
    return RawText(text, span, common), (first + len(body)) if body else idx, None


_WORDISH = frozenset("_./-")


def _bare_value_hint(text: str, i: int) -> str | None:
    """The hint for a '-' (outside ``->``) or a '/' right after a word: most likely a value
    written bare (``model: gpt-5``, ``model: openai/gpt-4o``), which needs quotes; a '-' before
    anything else is a minus sign."""
    if text[i] not in "-/":
        return None
    start, end = i, i
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in _WORDISH):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] in _WORDISH):
        end += 1
    if start < i:
        return f'a value with a "{text[i]}" in it is a string: quote it, e.g. "{text[start:end]}"'
    return "negative numbers cannot be written" if text[i] == "-" else None
