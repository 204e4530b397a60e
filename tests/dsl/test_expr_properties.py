"""Property tests: no input makes the expression language raise anything but its own errors."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iterion.expr import ExprEvalError, ExprSyntaxError, evaluate, format_expr, parse_expr

SCOPE: dict[str, Any] = {
    "vars": {"n": 3, "s": "x", "l": [1, "a"], "b": True, "o": {"k": None}},
    "input": {"f": 1.5},
    "outputs": {"node": {"field": [1, 2], "flag": False}},
    "artifacts": {"a": "text"},
    "attachments": {"doc": {"path": "/p", "mime": "text/plain", "size": 3, "sha256": "00"}},
    "loop": {"l": {"iteration": 1, "max": 2, "previous_output": {"x": 1}}},
    "run": {"id": "r"},
}

ALPHABET = "abnlsvxrufio._ ()[],'\"!=<>&|+-*/0123456789eE\\\ttruefalsenull"

REFS = ["vars.n", "vars.s", "vars.l", "vars.b", "vars.o", "vars.o.k", "vars.missing", "input.f",
        "outputs.node", "outputs.node.field", "outputs.node.flag", "artifacts.a", "attachments.doc",
        "attachments.doc.size", "loop.l.iteration", "loop.l.max", "loop.l.previous_output.x",
        "run.id"]
LEAVES = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6).map(repr),
    st.text(alphabet="ab c'\"\\", max_size=5).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    st.sampled_from(["true", "false", "null", "[]", "[1, 'a']"] + REFS),
)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binops = st.sampled_from(["||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/"])
    return st.one_of(
        st.tuples(children, binops, children).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        st.tuples(children, binops, children).map(lambda t: f"(({t[0]}) {t[1]} ({t[2]}))"),
        st.tuples(st.sampled_from(["!", "-"]), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(["length", "unique"]), children).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(["contains", "join"]), children, children)
        .map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(children, children, children).map(lambda t: f"if({t[0]}, {t[1]}, {t[2]})"),
        st.lists(children, min_size=1, max_size=3).map(lambda xs: f"concat({', '.join(xs)})"),
        st.lists(children, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
    )


EXPRESSIONS = st.recursive(LEAVES, _extend, max_leaves=12)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_arbitrary_text_only_raises_syntax_errors(src: str) -> None:
    try:
        expr = parse_expr(src)
    except ExprSyntaxError as exc:
        assert 0 <= exc.offset <= len(src)
        return
    try:
        evaluate(expr, SCOPE)
    except ExprEvalError as exc:
        assert 0 <= exc.offset <= len(src)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_unicode_only_raises_syntax_errors(src: str) -> None:
    try:
        parse_expr(src)
    except ExprSyntaxError:
        pass


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_well_formed_expressions_evaluate_or_raise_eval_errors(src: str) -> None:
    expr = parse_expr(src)
    try:
        evaluate(expr, SCOPE)
    except ExprEvalError as exc:
        assert exc.message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_format_round_trips_and_keeps_meaning(src: str) -> None:
    expr = parse_expr(src)
    text = format_expr(expr)
    again = parse_expr(text)
    assert format_expr(again) == text

    def outcome(e: Any) -> Any:
        try:
            return ("ok", evaluate(e, SCOPE))
        except ExprEvalError as exc:
            return ("error", exc.message)

    assert outcome(expr) == outcome(again)
