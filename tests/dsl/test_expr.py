"""The expression language: parsing, references, evaluation semantics and error offsets."""

from __future__ import annotations

from typing import Any

import pytest

from iterion.expr import (
    ExprError,
    ExprEvalError,
    ExprSyntaxError,
    Reference,
    evaluate,
    expr_references,
    format_expr,
    parse_expr,
)

SCOPE: dict[str, Any] = {
    "vars": {"n": 3, "name": "bot", "flags": ["a", "b", "a"], "cfg": {"depth": 2}},
    "input": {"ok": True, "score": 0.5},
    "outputs": {"review": {"approved": False, "summary": "meh", "items": [1, 2, 2, 3]}},
    "artifacts": {"plan": "the plan"},
    "attachments": {"spec": {"path": "/tmp/spec.pdf", "mime": "application/pdf", "size": 10,
                             "sha256": "ab"}},
    "loop": {"fix": {"iteration": 2, "max": 3, "previous_output": {"approved": False}}},
    "run": {"id": "run-1"},
}


@pytest.mark.parametrize(("src", "expected"), [
    ("1", 1), ("1.5", 1.5), ("2e3", 2000.0), ('"a\\"b"', 'a"b'), ("'single'", "single"),
    ("true", True), ("false", False), ("null", None), ("[1, 'a', [true]]", [1, "a", [True]]),
    ("[]", []), ('"\\u00e9\\n"', "u00e9\n"),
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("10 - 4 - 3", 3), ("8 / 2 / 2", 2), ("7 / 2", 3), ("-7 / 2", -3), ("7 % 3", 1), ("-7 % 3", -1), ("7.0 / 2", 3.5),
    ("6 / 3", 2), ("-3 + 1", -2), ("- -3", 3), ("1.5 * 2", 3.0),
    ("'a' + 'b'", "ab"), ("[1] + [2]", [1, 2]),
    ("1 == 1.0", True), ("1 == true", False), ("'1' == 1", False), ("null == null", True),
    ("[1, [2]] == [1, [2.0]]", True), ("1 != 2", True), ("2 < 3", True), ("3 <= 3", True),
    ("'b' > 'a'", True), ("2 >= 3", False),
    ("true && false", False), ("true || false", True), ("!true", False), ("!!true", True),
    ("1 < 2 && 2 < 3 || false", True), ("!(1 == 2)", True),
    ("length('abc')", 3), ("length([1, 2])", 2), ("length(vars.cfg)", 1),
    ("concat([1], [2, 3], 4)", [1, 2, 3, 4]), ("concat('a', 1, true, null)", "a1truenull"),
    ("unique([1, 1.0, 2, 'x', 'x', [1], [1]])", [1, 2, "x", [1]]),
    ("contains([1, 2], 2)", True), ("contains([1, 2], '2')", False), ("contains('abc', 'b')", True),
    ("contains(vars.cfg, 'depth')", True),
    ("join(['a', 1, true], '-')", "a-1-true"), ("join([], ',')", ""),
    ("if(true, 1, 2)", 1), ("if(false, 1, 2)", 2),
])
def test_literals_operators_and_functions(src: str, expected: Any) -> None:
    result = evaluate(src, SCOPE)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(("src", "expected"), [
    ("vars.n", 3), ("vars.cfg.depth", 2), ("input.ok", True), ("outputs.review.summary", "meh"),
    ("outputs.review", SCOPE["outputs"]["review"]), ("artifacts.plan", "the plan"),
    ("attachments", None),  # a bare name, even `attachments`, is a field of the implicit input
    ("loop.fix.iteration", 2), ("loop.fix.max", 3), ("loop.fix.previous_output.approved", False),
    ("run.id", "run-1"),
    ("length(unique(outputs.review.items)) == 3", True),
    ("loop.fix.iteration < loop.fix.max && !outputs.review.approved", True),
    ("contains(vars.flags, 'b') && vars.name == \"bot\"", True),
])
def test_references_resolve(src: str, expected: Any) -> None:
    assert evaluate(src, SCOPE) == expected


def test_history_reads_outputs_history() -> None:
    scope = {**SCOPE, "outputs_history": {"review": [{"approved": False}, {"approved": True}]}}
    assert evaluate("length(outputs.review.history)", scope) == 2


def test_references_are_listed_in_source_order_with_offsets() -> None:
    src = "outputs.a.b && contains(vars.x, input.y) || loop.l.iteration > run.id"
    refs = expr_references(parse_expr(src))
    assert refs == [
        Reference("outputs", ("a", "b"), 0),
        Reference("vars", ("x",), src.index("vars")),
        Reference("input", ("y",), src.index("input")),
        Reference("loop", ("l", "iteration"), src.index("loop")),
        Reference("run", ("id",), src.index("run")),
    ]
    assert refs[0].dotted == "outputs.a.b"


def test_literals_have_no_references() -> None:
    assert expr_references(parse_expr("1 + length('vars.x')")) == []


@pytest.mark.parametrize(("src", "fragment"), [
    ("length(1, 2)", "takes 1 argument"),
    ("if(true, 1)", "takes 3 argument"),
    ("concat()", "at least 1"),
])
def test_wrong_arity_is_a_run_time_error(src: str, fragment: str) -> None:
    # docs/language.md 4: "unknown name: C040; wrong arity: run-time error"
    node = parse_expr(src)
    with pytest.raises(ExprEvalError, match=fragment):
        evaluate(node, {})


@pytest.mark.parametrize(("src", "offset", "fragment"), [
    ("", 0, "empty"),
    ("   ", 0, "empty"),
    ("1 +", 3, "end of expression"),
    ("(1 + 2", 6, "')'"),
    ("vars", 0, "needs a name"),
    ("vars.", 4, "after '.'"),
    ("run.name", 0, "only run.id"),
    ("loop.l", 0, "loop.NAME.iteration"),
    ("loop.l.iteration.x", 0, "has no fields"),
    ("foo(1)", 0, "unknown function 'foo'"),
    ("1 = 1", 2, "'=='"),
    ("a & b", 2, "'&&'"),
    ("x | y", 2, "'||'"),
    ("'abc", 0, "unterminated string"),
    ("1 2", 2, "after a complete expression"),
    ("12abc", 0, "malformed number"),
    ("1e999", 0, "out of range"),
    ("[1, 2", 5, "','"),
    ("#", 0, "unexpected character"),
    ("vars.x.1", 6, "after '.'"),
])
def test_syntax_errors_carry_message_and_offset(src: str, offset: int, fragment: str) -> None:
    with pytest.raises(ExprSyntaxError) as info:
        parse_expr(src)
    assert info.value.offset == offset, info.value.message
    assert fragment in info.value.message
    assert isinstance(info.value, ExprError)


def test_a_flat_chain_has_no_depth_and_nesting_stops_at_256_levels() -> None:
    """The original's cap is 256 nested levels; a left-associative chain has no depth (issue 28):
    any length parses, evaluates and formats; 257 levels is a syntax error, never a RecursionError."""
    # ten times Python's default recursion limit: a parser, evaluator or formatter that recursed
    # per operand would raise here (100,000 operands took ~3 s and proved nothing more)
    chain = " + ".join(["1"] * 10_000)
    assert evaluate(chain, {}) == 10_000
    assert format_expr(parse_expr(chain)) == chain
    assert evaluate(" && ".join(["true"] * 5_000) + " && false", {}) is False
    assert evaluate("1 - 2 - 3 - 4", {}) == -8  # still left-associative
    # the deepest shape per level: every precedence step, then a parenthesis
    level = "(true || false && 1 == 1 + 2 * "
    deep = level * 256 + "1" + ")" * 256
    assert evaluate(deep, {}) is True
    assert format_expr(parse_expr(format_expr(parse_expr(deep)))) == format_expr(parse_expr(deep))
    for src in ("(" * 256 + "1" + ")" * 256, "- " * 256 + "1", "not " * 256 + "true",
                "[" * 256 + "1" + "]" * 256, "concat(" * 255 + "'a'" + ")" * 255):
        parse_expr(src)
        evaluate(src, {})
    for src in (level * 257 + "1" + ")" * 257, "(" * 257 + "1" + ")" * 257, "!" * 500 + "true",
                "[" * 300 + "]" * 300, "(" * 100_000 + "1" + ")" * 100_000):
        with pytest.raises(ExprSyntaxError, match="nested too deeply .more than 256 levels"):
            parse_expr(src)


@pytest.mark.parametrize(("src", "fragment"), [
    ("1 / 0", "division by zero"),
    ("1.0 / 0.0", "division by zero"),
    ("1 + true", "needs two numbers"),
    ("true + 1", "needs two numbers"),
    ("1 < 'a'", "compares two numbers or two strings"),
    ("[1] < [2]", "compares"),
    ("-'a'", "needs a number"),
    ("length(1)", "length()"),
    ("unique('ab')", "unique()"),
    ("contains(1, 1)", "contains()"),
    ("contains('ab', 1)", "contains()"),
    ("join('ab', ',')", "join()"),
    ("join(['a'], 1)", "separator"),
    ("1e308 * 10", "not a finite number"),
    ("1e300 * 1e300", "finite"),
])
def test_eval_errors(src: str, fragment: str) -> None:
    with pytest.raises(ExprEvalError) as info:
        evaluate(src, SCOPE)
    assert fragment in info.value.message


def test_eval_error_offset_points_at_the_failing_part() -> None:
    src = "1 + 'a' * 2"
    with pytest.raises(ExprEvalError) as info:
        evaluate(src, SCOPE)
    assert info.value.offset == src.index("*")
    with pytest.raises(ExprEvalError) as info:
        evaluate("1 + 2 / 0", SCOPE)
    assert info.value.offset == 6


def test_a_missing_value_is_null() -> None:
    assert evaluate("loop.l.iteration", {"vars": {}}) is None
    assert evaluate("vars.missing == null", SCOPE) is True
    assert evaluate("outputs.nope.field", SCOPE) is None


def test_short_circuit_and_lazy_if_skip_the_unevaluated_side() -> None:
    assert evaluate("false && vars.missing", SCOPE) is False
    assert evaluate("true || 1 / 0", SCOPE) is True
    assert evaluate("if(true, 'ok', vars.missing)", SCOPE) == "ok"
    assert evaluate("if(false, 1 / 0, 'ok')", SCOPE) == "ok"


def test_integer_overflow_is_an_eval_error() -> None:
    with pytest.raises(ExprEvalError, match="overflow"):
        evaluate("9223372036854775807 + 1", {})
    assert evaluate("9223372036854775807 / 3", {}) == 3074457345618258602


def test_huge_int_mixed_with_float_is_an_eval_error() -> None:
    big = "9" * 400
    with pytest.raises(ExprEvalError, match="out of range"):
        evaluate(f"{big} / 2.5", {})


def test_format_normalises_spelling() -> None:
    a = parse_expr("((vars.x+1)*2)==  'a'||!input.ok")
    b = parse_expr('(vars.x + 1) * 2 == "a" || !input.ok')
    assert format_expr(a) == format_expr(b) == '(vars.x + 1) * 2 == "a" || !input.ok'
    assert format_expr(parse_expr("1 - (2 - 3)")) == "1 - (2 - 3)"
    assert format_expr(parse_expr("(1 - 2) - 3")) == "1 - 2 - 3"
    assert format_expr(parse_expr("-(-1)")) == "- -1"
    assert format_expr(parse_expr("-(1 + 2)")) == "-(1 + 2)"


def test_parse_rejects_non_string() -> None:
    with pytest.raises(ExprSyntaxError):
        parse_expr(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(("src", "expected"), [
    ("approved and blockers == 0", True), ("not approved", False), ("approved or missing", True),
    ("blockers > 0 or not approved", False), ("not blockers", True), ("count % 2 == 1", True),
    ("title", "Fix"), ("nothing", None), ("length(nothing) == 0", True),
    ("contains(nothing, 1)", False), ("join(nothing, ',')", ""), ("concat([1], nothing, [2])", [1, 2]),
    ("'n=' + count", "n=3"), ("count + 'x'", "3x"), ("1.5 + 'x'", "1.5x"),
    ("'a\\qb'", "aqb"), ("if('no', 1, 2)", 2), ("if('  FALSE ', 1, 2)", 2), ("if('0', 1, 2)", 2),
    ("if([], 1, 2)", 2), ("if({}, 1, 2)" if False else "if(0.0, 1, 2)", 2), ("if('yes', 1, 2)", 1),
    ("1 and 'x'", True), ("0 or ''", False), ("!'false'", True),
])
def test_bare_fields_word_operators_and_truthiness(src: str, expected: Any) -> None:
    scope = {"input": {"approved": True, "blockers": 0, "count": 3, "title": "Fix"}}
    assert evaluate(src, scope) == expected


def test_comparisons_do_not_chain_and_bare_names_format_bare() -> None:
    with pytest.raises(ExprSyntaxError, match="do not chain"):
        parse_expr("a < b < c")
    assert format_expr(parse_expr("approved and not (x == 1)")) == "approved && !(x == 1)"
    assert format_expr(parse_expr("(a < b) == c")) == "(a < b) == c"


@pytest.mark.parametrize("src", ["1 / 0", "5 % 0", "2.5 % 2", "'a' < 1", "[1] - 1"])
def test_runtime_faults_are_eval_errors(src: str) -> None:
    with pytest.raises(ExprEvalError):
        evaluate(src, {})
