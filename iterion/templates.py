"""`{{ ... }}` templates (docs/language.md section 5), plus `{{include "file"}}`.

A marker holds either one reference (`{{outputs.review.summary}}`, whitespace allowed inside
the braces) or an include (`{{include "relative/file.md"}}`). Text outside markers is literal;
a lone `{` or `}` is literal too. Reference shapes and their resolution are the expression
language's (``iterion.expr``), so a template and a `when` read the scope identically.

`{{!ref}}` is the raw form of a reference (docs/language.md 5): it parses as a ``RawReference``, a
``Reference`` whose value a tool command inserts unquoted (``iterion.shellquote`` holds the rule).

Offsets: a ``Reference`` points at its first character (the namespace), an ``Include`` at the
`{{` that opens its marker. Included files are inserted verbatim (their trailing newline kept).
`${NAME}` environment substitution happens at compile time in the DSL, not here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitrefs.persist.inputs import SOURCE_LIMIT, InputFileError, read_text_bounded
from iterion.expr import (
    NAMESPACES,
    WORD_OPERATORS,
    ExprSyntaxError,
    Ref,
    Reference,
    parse_expr,
    reference_shape_error,
    resolve_reference,
)
from iterion.shellquote import RenderMode, UnquotableValue, substitute

OPEN = "{{"
CLOSE = "}}"


class TemplateSyntaxError(ValueError):
    """A malformed template (DSL diagnostic C004), or an include that cannot be expanded."""

    def __init__(self, message: str, offset: int = 0, path: str | None = None, include: bool = False) -> None:
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{message} (at offset {offset})")
        self.message = message
        self.offset = offset
        self.path = path  # the file the offset is in, when known
        self.include = include  # an include that cannot be expanded (L003), not a malformed marker (C004)


class TemplateRenderError(ValueError):
    """A reference that names nothing in the run's scope (the engine's TEMPLATE_FAILED)."""

    def __init__(self, message: str, offset: int = 0, reference: str | None = None) -> None:
        super().__init__(f"{message} (at offset {offset})")
        self.message = message
        self.offset = offset
        self.reference = reference


@dataclass(frozen=True)
class Include:
    path: str
    offset: int


@dataclass(frozen=True)
class RawReference(Reference):
    """`{{!ref}}`: the reference, inserted unquoted into a tool command (docs/language.md 5)."""


RAW = "!"

Piece = str | Reference | Include


def _parse_include(body: str, body_offset: int, marker_offset: int) -> Include:
    rest = body.strip()[len("include"):].strip()
    if len(rest) < 2 or rest[0] != '"' or rest[-1] != '"' or '"' in rest[1:-1] or "\\" in rest:
        raise TemplateSyntaxError('include needs one quoted relative path: {{include "file.md"}}',
                                  marker_offset)
    path = rest[1:-1]
    if not path:
        raise TemplateSyntaxError("include path is empty", marker_offset, include=True)
    if os.path.isabs(path) or path.startswith("/") or path.startswith("\\"):
        raise TemplateSyntaxError(f"include path {path!r} must be relative to the including file",
                                  marker_offset, include=True)
    return Include(path, marker_offset)


# A plain dotted reference (`vars.target`, `outputs.review.summary`): the common marker, read
# without the expression parser (a prompt may hold 100,000 of them). ASCII names only, so the
# shape is exactly one the parser accepts; anything else takes the general path.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _plain_reference(stripped: str, offset: int) -> Reference | None:
    if _PLAIN.fullmatch(stripped) is None:
        return None
    name, *path = stripped.split(".")
    if name not in NAMESPACES or WORD_OPERATORS.intersection(path) or reference_shape_error(name, path):
        return None  # the parser says what is wrong
    return Reference(name, tuple(path), offset)


def _parse_reference(body: str, body_offset: int) -> Reference:
    stripped = body.strip()
    lead = len(body) - len(body.lstrip())
    if not stripped:
        raise TemplateSyntaxError("empty template reference {{}}", body_offset - len(OPEN))
    plain = _plain_reference(stripped, body_offset + lead)
    if plain is not None:
        return plain
    try:
        node = parse_expr(stripped, implicit_fields=False)
    except ExprSyntaxError as exc:
        raise TemplateSyntaxError(f"malformed template reference {{{{{stripped}}}}}: {exc.message}",
                                  body_offset + lead + exc.offset) from None
    if not isinstance(node, Ref):
        raise TemplateSyntaxError(
            f"malformed template reference {{{{{stripped}}}}}: a template holds one reference such as "
            "{{vars.NAME}} or {{outputs.NODE.FIELD}}, not an expression", body_offset + lead)
    ref = node.ref
    return Reference(ref.namespace, ref.path, body_offset + lead + ref.offset)


def parse_template(text: str) -> list[Piece]:
    """Split ``text`` into literal strings, references and includes; raises TemplateSyntaxError."""
    pieces: list[Piece] = []
    pos = 0
    literal: list[str] = []
    while True:
        start = text.find(OPEN, pos)
        if start < 0:
            literal.append(text[pos:])
            break
        literal.append(text[pos:start])
        end = text.find(CLOSE, start + len(OPEN))
        if end < 0:
            raise TemplateSyntaxError("unterminated template reference: '{{' without '}}'", start)
        body_offset = start + len(OPEN)
        body = text[body_offset:end]
        if OPEN in body:
            raise TemplateSyntaxError("'{{' inside a template reference", body_offset + body.index(OPEN))
        head = body.strip()
        if head == "include" or head.startswith(("include ", 'include"', "include\t", "include\n")):
            piece: Piece = _parse_include(body, body_offset, start)
        elif head.startswith(RAW):
            bang = body.index(RAW)
            if not body[bang + 1:].strip():
                raise TemplateSyntaxError("empty raw template reference {{!}}", start)
            ref = _parse_reference(body[bang + 1:], body_offset + bang + 1)
            piece = RawReference(ref.namespace, ref.path, ref.offset)
        else:
            piece = _parse_reference(body, body_offset)
        lit = "".join(literal)
        if lit:
            pieces.append(lit)
        literal = []
        pieces.append(piece)
        pos = end + len(CLOSE)
    lit = "".join(literal)
    if lit:
        pieces.append(lit)
    return pieces


def template_references(text: str) -> list[Reference]:
    return [p for p in parse_template(text) if isinstance(p, Reference)]


def template_includes(text: str) -> list[Include]:
    return [p for p in parse_template(text) if isinstance(p, Include)]


def _default_read(path: Path) -> str:
    return read_text_bounded(path, "include file", SOURCE_LIMIT)


def relative_target(holder_dir: str | os.PathLike[str], rel: str) -> str:
    """The normalised path ``rel`` names when written in a file of ``holder_dir``: the one rule
    for `{{include}}` markers, and for the DSL's ``import`` lines too."""
    return os.path.normpath(os.path.join(holder_dir, rel))


def expand_includes(text: str, base_dir: Path,
                    read: Callable[[Path], str] | None = None) -> tuple[str, list[Path]]:
    """Inline every `{{include "rel"}}` recursively (each path relative to the file that holds
    the marker). Returns the expanded text and every file read, in first-read order, each once.
    A cycle, an unreadable file or a malformed included file raises TemplateSyntaxError.
    """
    reader = read or _default_read
    cache: dict[Path, str] = {}
    order: list[Path] = []

    def load(path: Path, marker: Include, holder: str | None) -> str:
        if path not in cache:
            try:
                cache[path] = reader(path)
            except InputFileError as exc:  # a FIFO, a device, too big: refused, never waited on
                raise TemplateSyntaxError(f"include {marker.path!r}: cannot read {path}: {exc.reason}",
                                          marker.offset, holder) from None
            except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL in the path
                reason = "not found" if isinstance(exc, FileNotFoundError) else str(exc)
                raise TemplateSyntaxError(f"include {marker.path!r}: cannot read {path}: {reason}",
                                          marker.offset, holder) from None
            order.append(path)
        return cache[path]

    def expand(body: str, here: Path, stack: tuple[Path, ...], holder: str | None) -> str:
        try:
            pieces = parse_template(body)
        except TemplateSyntaxError as exc:
            raise TemplateSyntaxError(exc.message, exc.offset, holder, include=exc.include) from None
        out: list[str] = []
        pos = 0
        for piece in pieces:
            if not isinstance(piece, Include):
                continue
            end = body.index(CLOSE, piece.offset) + len(CLOSE)
            out.append(body[pos:piece.offset])
            target = Path(relative_target(here, piece.path))
            if target in stack:
                cycle = " -> ".join(str(p) for p in (*stack[stack.index(target):], target))
                raise TemplateSyntaxError(f"include cycle: {cycle}", piece.offset, holder)
            included = load(target, piece, holder)
            out.append(expand(included, target.parent, (*stack, target), str(target)))
            pos = end
        out.append(body[pos:])
        return "".join(out)

    return expand(text, Path(base_dir), (), None), order


def render(text: str, scope: Mapping[str, Any], mode: RenderMode = "text") -> str:
    """Replace each reference by its value, written as ``mode`` says (``iterion.shellquote``).

    ``text`` (prompts, instructions, messages): strings as-is, everything else compact JSON, a
    `{{!ref}}` left as written. ``with``: the same, `!` without effect. ``shell`` (a tool
    `command:`, a sh/bash `script:`): each value one single-quoted shell word (lists: one word
    per item), a null value leaves its marker in place, `{{!ref}}` unquoted. ``program`` (a
    python/node `script:`): JSON literals, `{{!ref}}` raw.

    One pass: a substituted value is never scanned for markers again. A reference that names
    nothing (yet) stays as written in ``text``/``with`` (`loop.N.previous_output...` renders
    empty), and is a missing (null) value in ``shell``/``program`` (docs/language.md 5.2, 5.3).
    A value the mode cannot write (a NUL byte in shell text) raises TemplateRenderError; `{{outputs.NODE.history}}` reads ``scope["outputs_history"][NODE]``. An
    include that was not expanded is an error too (the compiler inlines includes before a
    template reaches the engine).
    """
    try:
        pieces = parse_template(text)
    except TemplateSyntaxError as exc:
        raise TemplateRenderError(exc.message, exc.offset) from None
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
        elif isinstance(piece, Include):
            raise TemplateRenderError(f"include {piece.path!r} was not expanded before rendering",
                                      piece.offset)
        else:
            ref = piece

            def error(message: str, offset: int, _ref: Reference = ref) -> TemplateRenderError:
                return TemplateRenderError(message, offset, _ref.dotted)

            try:
                value = resolve_reference(ref, scope, error)
            except TemplateRenderError:
                # names nothing yet (a node not run, a missing field): docs/language.md §5 "stays in the text
                # as written", `loop.N.previous_output...` "renders empty on the first round"; 5.3
                # a missing value "leaves the {{...}} marker in place" in a command, `null` in a script
                if mode in ("text", "with"):
                    previous = ref.namespace == "loop" and ref.path[1:2] == ("previous_output",)
                    out.append("" if previous else _marker_text(text, ref))
                    continue
                value = None
            try:
                written = substitute(value, mode, isinstance(ref, RawReference))
            except UnquotableValue as exc:
                raise TemplateRenderError(f"{{{{{ref.dotted}}}}}: {exc}", ref.offset, ref.dotted) from None
            out.append(_marker_text(text, ref) if written is None else written)
    return "".join(out)


def _marker_text(text: str, ref: Reference) -> str:
    """The marker holding ``ref`` exactly as written (no `{{` or `}}` occurs inside a marker)."""
    start = text.rfind(OPEN, 0, ref.offset)
    return text[start:text.index(CLOSE, ref.offset) + len(CLOSE)]
