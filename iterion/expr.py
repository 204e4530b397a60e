"""The expression language (docs/language.md section 4): used by `compute` nodes and quoted `when`.

Grammar (lowest precedence first)::

    expr    := or
    or      := and ( "||" and )*
    and     := eq ( "&&" eq )*
    eq      := cmp ( ("==" | "!=") cmp )*
    cmp     := add ( ("<" | "<=" | ">" | ">=") add )*
    add     := mul ( ("+" | "-") mul )*
    mul     := unary ( ("*" | "/") unary )*
    unary   := ("!" | "-") unary | primary
    primary := INT | FLOAT | STRING | true | false | null | "[" [expr ("," expr)*] "]"
             | FUNC "(" [expr ("," expr)*] ")" | REFERENCE | "(" expr ")"

Strings may use double or single quotes (an expression usually sits inside a double-quoted DSL
string, where single quotes save escaping). Evaluation is strict: `&&`, `||`, `!` and `if`
need booleans, arithmetic needs numbers (booleans are not numbers), ordering needs two numbers
or two strings; anything else is an ``ExprEvalError`` (the engine's EXPRESSION_FAILED).
`int / int` stays an int when the division is exact, else it is a float.

Reference shapes and their resolution are shared with ``iterion.templates``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NAMESPACES: tuple[str, ...] = ("vars", "input", "outputs", "artifacts", "attachments", "loop", "run")
LOOP_FIELDS: tuple[str, ...] = ("iteration", "max", "previous_output")
ATTACHMENT_FIELDS: tuple[str, ...] = ("path", "url", "mime", "size", "sha256")
# Leading names an expression reads as a namespace; any other is a field of the implicit input.
EXPR_NAMESPACES: tuple[str, ...] = ("vars", "input", "outputs", "artifacts", "loop", "run")
# Nesting bound, the original's: parentheses, list brackets, call arguments and unary operators
# each open a level; a left-associative chain (`a + b + ... + z`) opens none, whatever its length.
MAX_NESTING = 256
# Frames a tree nested MAX_NESTING levels may take (parser or evaluator, a few per level and per
# precedence step): Python frames, no C stack since 3.11, so a limit this size is safe.
_RECURSION_NEEDED = 12 * MAX_NESTING + 2000


class ExprError(Exception):
    """An expression problem. ``offset`` is the 0-based character offset in the source."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(f"{message} (at offset {offset})")
        self.message = message
        self.offset = offset


class ExprSyntaxError(ExprError):
    """The expression does not parse (DSL diagnostic C040)."""


class ExprEvalError(ExprError):
    """A runtime evaluation error (the engine's EXPRESSION_FAILED)."""


@dataclass(frozen=True)
class Reference:
    """A reference such as ``outputs.node.field``; shared with templates."""

    namespace: str  # vars | input | outputs | artifacts | attachments | loop | run
    path: tuple[str, ...]
    offset: int
    # A bare name in an expression (`approved`): a field of the implicit input (in a `when`,
    # the source node's output; in compute, the node's input). Namespace "input", written bare.
    implicit: bool = False

    @property
    def dotted(self) -> str:
        return ".".join((self.namespace, *self.path))

    @property
    def written(self) -> str:
        """The reference as the author wrote it (bare for an implicit input field)."""
        return ".".join(self.path) if self.implicit else self.dotted

    def __str__(self) -> str:
        return self.dotted


def reference_shape_error(namespace: str, path: Sequence[str]) -> str | None:
    """Why ``namespace.path`` is not a well-formed reference, or None if it is."""
    if namespace not in NAMESPACES:
        return (f"unknown reference namespace {namespace!r} "
                f"(expected one of: {', '.join(NAMESPACES)})")
    if not path:
        return f"{namespace!r} needs a name after it, e.g. {namespace}.NAME"
    if namespace == "run":
        if tuple(path) != ("id",):
            return f"unknown run reference run.{'.'.join(path)}: only run.id exists"
    elif namespace == "loop":
        if len(path) < 2 or path[1] not in LOOP_FIELDS:
            return (f"loop reference loop.{'.'.join(path)} must be loop.NAME.iteration, "
                    "loop.NAME.max or loop.NAME.previous_output[.field]")
        if path[1] != "previous_output" and len(path) > 2:
            return f"loop.{path[0]}.{path[1]} has no fields"
    # attachments.NAME.FIELD: an unknown FIELD is C054, reported by the DSL's reference check
    return None


# --- AST ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    offset: int


@dataclass(frozen=True)
class Literal(Expr):
    value: Any  # int | float | str | bool | None


@dataclass(frozen=True)
class ListLit(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Ref(Expr):
    ref: Reference


@dataclass(frozen=True)
class Unary(Expr):
    op: str  # "!" | "-"
    operand: Expr


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Call(Expr):
    name: str
    args: tuple[Expr, ...]


# name -> (min args, max args or None for unbounded)
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "length": (1, 1),
    "concat": (1, None),
    "unique": (1, 1),
    "contains": (2, 2),
    "join": (2, 2),
    "if": (3, 3),
}

# One comparison level, not chainable (`a < b < c` does not parse); `and`/`or`/`not` are
# read as `&&`/`||`/`!` (the canonical spelling).
_BINARY_PREC: dict[str, int] = {
    "||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
    "+": 5, "-": 5, "*": 6, "/": 6, "%": 6,
}
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
_WORD_OPS = {"and": "&&", "or": "||", "not": "!"}
WORD_OPERATORS = frozenset(_WORD_OPS)  # never a name, not even after a dot
_INT_MAX = 2 ** 63 - 1
_UNARY_PREC = 7

# --- lexer -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tok:
    kind: str  # int | float | str | ident | op | end
    text: str
    value: Any
    offset: int


_TWO_CHAR_OPS = ("==", "!=", "<=", ">=", "&&", "||")
_ONE_CHAR_OPS = "<>!+-*/%()[],."
# docs/language.md §4: `\\ \" \' \n \t`; any other `\x` is `x`.
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def is_ident_start(ch: str) -> bool:
    """The first character of a name, here and in `.bot` files: a letter or `_`, Unicode
    counting (docs/language.md 1.3), so a node or var the DSL lexer accepts can be referenced."""
    return ch == "_" or ch.isalpha()


def _is_ident_char(ch: str) -> bool:
    # the DSL lexer's `\w`: letters, digits (any script) and `_`
    return ch == "_" or ch.isalnum()


def _lex_string(src: str, i: int) -> tuple[str, int]:
    quote = src[i]
    start = i
    i += 1
    out: list[str] = []
    while i < len(src):
        ch = src[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\":
            if i + 1 >= len(src):
                break
            esc = src[i + 1]
            out.append(_ESCAPES.get(esc, esc))
            i += 2
            continue
        out.append(ch)
        i += 1
    raise ExprSyntaxError("unterminated string", start)


def _lex_number(src: str, i: int) -> tuple[_Tok, int]:
    start = i
    while i < len(src) and src[i].isascii() and src[i].isdigit():
        i += 1
    is_float = False
    if i + 1 < len(src) and src[i] == "." and src[i + 1].isascii() and src[i + 1].isdigit():
        is_float = True
        i += 1
        while i < len(src) and src[i].isascii() and src[i].isdigit():
            i += 1
    if i < len(src) and src[i] in "eE":
        j = i + 1
        if j < len(src) and src[j] in "+-":
            j += 1
        if j < len(src) and src[j].isascii() and src[j].isdigit():
            is_float = True
            i = j
            while i < len(src) and src[i].isascii() and src[i].isdigit():
                i += 1
    if i < len(src) and _is_ident_char(src[i]):
        raise ExprSyntaxError(f"malformed number {src[start:i + 1]!r}", start)
    text = src[start:i]
    if is_float:
        value = float(text)
        if not math.isfinite(value):
            raise ExprSyntaxError(f"number {text} is out of range", start)
        return _Tok("float", text, value, start), i
    if len(text) > 4000:  # int() refuses huge digit strings; report it as a syntax problem
        raise ExprSyntaxError("integer literal is too long", start)
    return _Tok("int", text, int(text), start), i


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i = 0
    n = len(src)
    while i < n:
        ch = src[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ch in "\"'":
            value, j = _lex_string(src, i)
            toks.append(_Tok("str", src[i:j], value, i))
            i = j
            continue
        if ch.isascii() and ch.isdigit():
            tok, i = _lex_number(src, i)
            toks.append(tok)
            continue
        if is_ident_start(ch):
            j = i + 1
            while j < n and _is_ident_char(src[j]):
                j += 1
            word = src[i:j]
            if word in _WORD_OPS:
                toks.append(_Tok("op", _WORD_OPS[word], None, i))
            else:
                toks.append(_Tok("ident", word, None, i))
            i = j
            continue
        two = src[i:i + 2]
        if two in _TWO_CHAR_OPS:
            toks.append(_Tok("op", two, None, i))
            i += 2
            continue
        if ch in _ONE_CHAR_OPS:
            toks.append(_Tok("op", ch, None, i))
            i += 1
            continue
        hints = {"=": "; use '==' to compare", "&": "; use '&&'", "|": "; use '||'"}
        raise ExprSyntaxError(f"unexpected character {ch!r}{hints.get(ch, '')}", i)
    toks.append(_Tok("end", "", None, n))
    return toks


# --- parser ------------------------------------------------------------------------------


class _Parser:
    def __init__(self, src: str, implicit_fields: bool = True) -> None:
        self.src = src
        self.implicit_fields = implicit_fields
        self.toks = _tokenize(src)
        self.pos = 0
        self.nesting = 0

    def peek(self) -> _Tok:
        return self.toks[self.pos]

    def next(self) -> _Tok:
        tok = self.toks[self.pos]
        if tok.kind != "end":
            self.pos += 1
        return tok

    def expect_op(self, op: str, what: str) -> _Tok:
        tok = self.next()
        if tok.kind != "op" or tok.text != op:
            raise ExprSyntaxError(f"expected {op!r} {what}, found {_describe(tok)}", tok.offset)
        return tok

    def parse(self) -> Expr:
        if self.peek().kind == "end":
            raise ExprSyntaxError("empty expression", 0)
        expr = self.binary(0)
        tok = self.peek()
        if tok.kind != "end":
            raise ExprSyntaxError(f"unexpected {_describe(tok)} after a complete expression", tok.offset)
        return expr

    def binary(self, min_prec: int) -> Expr:
        left = self.unary()
        compared = False
        while True:
            tok = self.peek()
            prec = _BINARY_PREC.get(tok.text) if tok.kind == "op" else None
            if prec is None or prec <= min_prec:
                return left
            if tok.text in _COMPARISONS:
                if compared:
                    raise ExprSyntaxError(f"comparisons do not chain: {tok.text!r} after a comparison; "
                                          "join them with 'and'", tok.offset)
                compared = True
            self.next()
            right = self.binary(prec)
            left = Binary(tok.offset, tok.text, left, right)

    def _enter(self, offset: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise ExprSyntaxError(f"expression is nested too deeply (more than {MAX_NESTING} levels of "
                                  "parentheses, brackets, calls or unary operators)", offset)

    def unary(self) -> Expr:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("!", "-"):
            self.next()
            self._enter(tok.offset)
            # `not` binds looser than a comparison (`not a == b` is `not (a == b)`); `!` and `-` bind tight
            operand = self.binary(_BINARY_PREC["&&"]) if tok.text == "!" else self.unary()
            self.nesting -= 1
            return Unary(tok.offset, tok.text, operand)
        return self.primary()

    def arguments(self, close: str, what: str) -> tuple[Expr, ...]:
        items: list[Expr] = []
        if self.peek().kind == "op" and self.peek().text == close:
            self.next()
            return ()
        while True:
            items.append(self.binary(0))
            tok = self.next()
            if tok.kind == "op" and tok.text == close:
                return tuple(items)
            if not (tok.kind == "op" and tok.text == ","):
                raise ExprSyntaxError(f"expected ',' or {close!r} in {what}, found {_describe(tok)}",
                                      tok.offset)

    def primary(self) -> Expr:
        tok = self.next()
        if tok.kind in ("int", "float", "str"):
            return Literal(tok.offset, tok.value)
        if tok.kind == "op" and tok.text == "(":
            self._enter(tok.offset)
            inner = self.binary(0)
            self.expect_op(")", "to close '('")
            self.nesting -= 1
            return inner
        if tok.kind == "op" and tok.text == "[":
            self._enter(tok.offset)
            items = self.arguments("]", "a list")
            self.nesting -= 1
            return ListLit(tok.offset, items)
        if tok.kind == "ident":
            return self.ident(tok)
        if tok.kind == "end":
            raise ExprSyntaxError("unexpected end of expression", tok.offset)
        raise ExprSyntaxError(f"unexpected {_describe(tok)}", tok.offset)

    def ident(self, tok: _Tok) -> Expr:
        name = tok.text
        nxt = self.peek()
        if nxt.kind == "op" and nxt.text == "(":
            if name not in FUNCTIONS:
                raise ExprSyntaxError(
                    f"unknown function {name!r} (expected one of: {', '.join(FUNCTIONS)})", tok.offset)
            self.next()
            self._enter(nxt.offset)
            args = self.arguments(")", f"the arguments of {name}()")
            self.nesting -= 1
            # "unknown name: C040; wrong arity: run-time error" (docs/language.md 4): checked in call()
            return Call(tok.offset, name, args)
        if name == "true":
            return Literal(tok.offset, True)
        if name == "false":
            return Literal(tok.offset, False)
        if name == "null":
            return Literal(tok.offset, None)
        path: list[str] = []
        while self.peek().kind == "op" and self.peek().text == ".":
            dot = self.next()
            part = self.next()
            if part.kind != "ident":
                raise ExprSyntaxError(f"expected a name after '.', found {_describe(part)}", dot.offset)
            path.append(part.text)
        if self.implicit_fields and name not in EXPR_NAMESPACES:
            # any other leading name (even `attachments`) is a field of the implicit input
            return Ref(tok.offset, Reference("input", (name, *path), tok.offset, implicit=True))
        if name not in NAMESPACES:
            raise ExprSyntaxError(
                f"unknown name {name!r}: a reference starts with one of {', '.join(NAMESPACES)}",
                tok.offset)
        problem = reference_shape_error(name, path)
        if problem:
            raise ExprSyntaxError(problem, tok.offset)
        return Ref(tok.offset, Reference(name, tuple(path), tok.offset))


def _children(node: Expr) -> tuple[Expr, ...]:
    if isinstance(node, ListLit):
        return node.items
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    return ()


def _deep_enough() -> None:
    """Let the recursive parser, evaluator and formatter reach MAX_NESTING levels (the default
    limit of 1,000 frames is below what 256 levels take); never lowers a higher limit. Done once,
    at import: changing it later, under a running test or thread, surprises whoever set it."""
    if sys.getrecursionlimit() < _RECURSION_NEEDED:
        sys.setrecursionlimit(_RECURSION_NEEDED)


_deep_enough()


def _left_spine(node: Binary) -> list[Binary]:
    """``node`` and the binary operations down its left operands, top first: a chain of any
    length is walked by a loop over this, never by recursion (it has no nesting depth)."""
    spine = [node]
    left = node.left
    while isinstance(left, Binary):
        spine.append(left)
        left = left.left
    return spine


def _describe(tok: _Tok) -> str:
    if tok.kind == "end":
        return "end of expression"
    return repr(tok.text)


def parse_expr(src: str, *, implicit_fields: bool = True) -> Expr:
    """Parse ``src``; raises ExprSyntaxError (with the offset of the problem).

    ``implicit_fields``: a leading name that is not a namespace is a field of the implicit
    input (expressions); False for template references, where it is an error."""
    if not isinstance(src, str):
        raise ExprSyntaxError("expression must be a string", 0)
    return _Parser(src, implicit_fields).parse()


def expr_references(expr: Expr) -> list[Reference]:
    """Every reference in ``expr``, in source order."""
    found: list[Reference] = []
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Ref):
            found.append(node.ref)
        stack.extend(_children(node))
    return sorted(found, key=lambda r: r.offset)


# --- formatting (canonical text, used by the canonical AST encoding) ----------------------


def format_expr(expr: Expr) -> str:
    """Canonical source text of ``expr``: whitespace, quote style and redundant parentheses
    normalised, so two spellings of one expression format identically."""
    return _fmt(expr, 0)


def _fmt(node: Expr, parent_prec: int) -> str:
    if isinstance(node, Literal):
        return _fmt_literal(node.value)
    if isinstance(node, ListLit):
        return "[" + ", ".join(_fmt(i, 0) for i in node.items) + "]"
    if isinstance(node, Ref):
        return node.ref.written
    if isinstance(node, Call):
        return node.name + "(" + ", ".join(_fmt(a, 0) for a in node.args) + ")"
    if isinstance(node, Unary):
        if node.op == "!":
            # `!`/`not` binds looser than comparisons and arithmetic: its operand needs
            # parentheses only for `&&`/`||`, and it needs them itself under a tighter operator.
            text = "!" + _fmt(node.operand, _UNARY_PREC)
            return f"({text})" if parent_prec > _BINARY_PREC["&&"] else text
        inner = _fmt(node.operand, _UNARY_PREC)
        # "- -1" must not become "--1"; a space keeps the two minus signs apart.
        sep = " " if node.op == "-" and inner.startswith("-") else ""
        return node.op + sep + inner
    if isinstance(node, Binary):
        # Left-associative: the right operand needs parentheses at equal precedence.
        # A comparison does not chain: a comparison on its left keeps its parentheses too.
        # The left spine is formatted bottom-up in a loop (a chain has no depth).
        spine = _left_spine(node)
        text = ""
        for i in range(len(spine) - 1, -1, -1):
            b = spine[i]
            prec = _BINARY_PREC[b.op]
            left_prec = prec if b.op in _COMPARISONS else prec - 1
            if i == len(spine) - 1:
                left_text = _fmt(b.left, left_prec)
            else:
                left_text = f"({text})" if _BINARY_PREC[spine[i + 1].op] <= left_prec else text
            text = f"{left_text} {b.op} {_fmt(b.right, prec)}"
        return f"({text})" if _BINARY_PREC[node.op] <= parent_prec else text
    raise TypeError(f"not an expression node: {node!r}")


def _fmt_literal(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


# --- evaluation --------------------------------------------------------------------------


_MISSING = object()


def resolve_reference(ref: Reference, scope: Mapping[str, Any],
                      error: Callable[[str, int], Exception] = ExprEvalError) -> Any:
    """The value ``ref`` names in ``scope``; ``error(message, offset)`` is raised if it names
    nothing. Shared by expressions and templates so both read the scope the same way."""
    ns = scope.get(ref.namespace, _MISSING) if isinstance(scope, Mapping) else _MISSING
    if not isinstance(ns, Mapping):
        raise error(f"unknown reference {ref.dotted}: no {ref.namespace!r} in scope", ref.offset)
    if ref.namespace == "outputs" and len(ref.path) == 2 and ref.path[1] == "history":
        history = scope.get("outputs_history")
        if isinstance(history, Mapping) and ref.path[0] in history:
            return history[ref.path[0]]
    cur: Any = ns
    for i, key in enumerate(ref.path):
        if not isinstance(cur, Mapping) or key not in cur:
            where = ".".join((ref.namespace, *ref.path[:i + 1]))
            detail = "" if where == ref.dotted else f" ({where} does not exist)"
            raise error(f"unknown reference {ref.dotted}{detail}", ref.offset)
        cur = cur[key]
    if ref.namespace == "attachments" and len(ref.path) == 1 and isinstance(cur, Mapping):
        # `attachments.NAME` alone means its path.
        if "path" not in cur:
            raise error(f"unknown reference {ref.dotted}: the attachment has no path", ref.offset)
        return cur["path"]
    return cur


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, Mapping):
        return "object"
    return type(v).__name__


def values_equal(a: Any, b: Any) -> bool:
    """Deep JSON equality: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if _is_num(a) and _is_num(b):
        return bool(a == b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return False


def to_text(value: Any) -> str:
    """How a value is spliced into text: strings as-is, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    except (ValueError, TypeError):
        return str(value)


def _check_number(value: Any, offset: int) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ExprEvalError("arithmetic result is not a finite number", offset)
    return value


def truthy(value: Any) -> bool:
    """docs/language.md §4: null, false, 0, an empty list/map and the strings "", "false", "no", "0"
    (any case, trimmed) are false; everything else is true."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if _is_num(value):
        return bool(value != 0)
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "no", "0")
    if isinstance(value, (list, tuple, Mapping)):
        return len(value) > 0
    return True


def _need_bool(value: Any, what: str, offset: int) -> bool:
    return truthy(value)


def _num_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    return str(v) if isinstance(v, int) else repr(v)


def _check_int(value: int, offset: int) -> int:
    if not -_INT_MAX - 1 <= value <= _INT_MAX:
        raise ExprEvalError("integer overflow", offset)
    return value


class _Evaluator:
    def __init__(self, scope: Mapping[str, Any]) -> None:
        self.scope = scope

    def eval(self, node: Expr) -> Any:
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Ref):
            try:
                return resolve_reference(node.ref, self.scope)
            except ExprEvalError:
                return None  # a missing value is null
        if isinstance(node, ListLit):
            return [self.eval(i) for i in node.items]
        if isinstance(node, Unary):
            v = self.eval(node.operand)
            if node.op == "!":
                return not _need_bool(v, "'!'", node.offset)
            if not _is_num(v):
                raise ExprEvalError(f"unary '-' needs a number, got {_type_name(v)}", node.offset)
            return -v
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, Call):
            return self.call(node)
        raise ExprEvalError(f"not an expression node: {type(node).__name__}", getattr(node, "offset", 0))

    def binary(self, node: Binary) -> Any:
        # the left spine in a loop, bottom-up: a chain of any length needs no recursion
        spine = _left_spine(node)
        value = self.eval(spine[-1].left)
        for b in reversed(spine):
            value = self.apply(b, value)
        return value

    def apply(self, node: Binary, a: Any) -> Any:
        """``node`` with its left operand already evaluated to ``a``."""
        op = node.op
        if op in ("&&", "||"):
            left = _need_bool(a, f"'{op}'", node.offset)
            if (op == "&&" and not left) or (op == "||" and left):
                return left  # short-circuit: the right side is not evaluated
            return _need_bool(self.eval(node.right), f"'{op}'", node.offset)  # yields a bool
        b = self.eval(node.right)
        if op == "==":
            return values_equal(a, b)
        if op == "!=":
            return not values_equal(a, b)
        if op in ("<", "<=", ">", ">="):
            if not ((_is_num(a) and _is_num(b)) or (isinstance(a, str) and isinstance(b, str))):
                raise ExprEvalError(f"'{op}' compares two numbers or two strings, got "
                                    f"{_type_name(a)} and {_type_name(b)}", node.offset)
            if op == "<":
                return a < b
            if op == "<=":
                return a <= b
            if op == ">":
                return a > b
            return a >= b
        if op == "+":
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            if isinstance(a, str) and _is_num(b):
                return a + _num_text(b)
            if _is_num(a) and isinstance(b, str):
                return _num_text(a) + b
            if isinstance(a, list) and isinstance(b, list):
                return a + b
        if not (_is_num(a) and _is_num(b)):
            raise ExprEvalError(f"'{op}' needs two numbers, got {_type_name(a)} and {_type_name(b)}",
                                node.offset)
        both_int = isinstance(a, int) and isinstance(b, int)
        try:
            if op == "%":
                if not both_int:
                    raise ExprEvalError(f"'%' needs two integers, got {_type_name(a)} and {_type_name(b)}",
                                        node.offset)
                if b == 0:
                    raise ExprEvalError("modulo by zero", node.offset)
                return a - b * _trunc_div(a, b)  # the sign follows the dividend
            if op in ("+", "-", "*"):
                r = a + b if op == "+" else a - b if op == "-" else a * b
                return _check_int(r, node.offset) if both_int else _check_number(r, node.offset)
            if b == 0:
                raise ExprEvalError("division by zero", node.offset)
            if both_int:
                return _check_int(_trunc_div(a, b), node.offset)  # int / int truncates
            return _check_number(a / b, node.offset)
        except OverflowError:
            raise ExprEvalError("arithmetic result is out of range", node.offset) from None

    def call(self, node: Call) -> Any:
        name = node.name
        lo, hi = FUNCTIONS[name]
        if len(node.args) < lo or (hi is not None and len(node.args) > hi):
            want = str(lo) if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise ExprEvalError(f"{name}() takes {want} argument(s), got {len(node.args)}", node.offset)
        if name == "if":
            cond = _need_bool(self.eval(node.args[0]), "if()", node.offset)
            return self.eval(node.args[1] if cond else node.args[2])  # lazy branches
        args = [self.eval(a) for a in node.args]
        if name == "length":
            v = args[0]
            if v is None:
                return 0
            if isinstance(v, (str, list, tuple, Mapping)):
                return len(v)
            raise ExprEvalError(f"length() needs a string, list or object, got {_type_name(v)}", node.offset)
        if name == "concat":
            if any(isinstance(a, (list, tuple)) for a in args):
                out: list[Any] = []
                for a in args:
                    if a is not None:  # nulls skipped
                        out.extend(a) if isinstance(a, (list, tuple)) else out.append(a)
                return out
            return "".join(to_text(a) for a in args)
        if name == "unique":
            v = args[0]
            if not isinstance(v, (list, tuple)):
                raise ExprEvalError(f"unique() needs a list, got {_type_name(v)}", node.offset)
            kept: list[Any] = []
            for item in v:
                if not any(values_equal(item, k) for k in kept):
                    kept.append(item)
            return kept
        if name == "contains":
            hay, needle = args
            if hay is None:
                return False
            if isinstance(hay, str):
                if not isinstance(needle, str):
                    raise ExprEvalError(f"contains() on a string needs a string, got {_type_name(needle)}",
                                        node.offset)
                return needle in hay
            if isinstance(hay, (list, tuple)):
                return any(values_equal(item, needle) for item in hay)
            if isinstance(hay, Mapping):
                return isinstance(needle, str) and needle in hay
            raise ExprEvalError(f"contains() needs a list, string or object, got {_type_name(hay)}",
                                node.offset)
        if name == "join":
            items, sep = args
            if items is None:
                return ""
            if not isinstance(items, (list, tuple)):
                raise ExprEvalError(f"join() needs a list, got {_type_name(items)}", node.offset)
            if not isinstance(sep, str):
                raise ExprEvalError(f"join() needs a string separator, got {_type_name(sep)}", node.offset)
            return sep.join(to_text(i) for i in items)
        raise ExprEvalError(f"unknown function {name!r}", node.offset)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def evaluate(expr: Expr | str, scope: Mapping[str, Any]) -> Any:
    """Evaluate ``expr`` (parsed or source) against ``scope``.

    ``scope`` = {"vars", "input", "outputs", "artifacts", "attachments", "loop", "run"} (each a
    mapping; absent namespaces are unknown references). Raises ExprSyntaxError for source that
    does not parse and ExprEvalError for runtime errors.
    """
    node = parse_expr(expr) if isinstance(expr, str) else expr
    try:
        return _Evaluator(scope).eval(node)
    except RecursionError:
        # Only reachable for hand-built trees deeper than the parser allows.
        raise ExprEvalError("expression is too deep to evaluate", node.offset) from None
