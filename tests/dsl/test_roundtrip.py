"""parse -> unparse -> parse is stable for every fixture: the same canonical encoding (what
`rewind --auto` compares) and a fixed point of the printer (issue 12 acceptance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.dsl.canonical import canonical_encoding
from iterion.dsl.parser import parse
from iterion.dsl.unparse import Unwritable, unparse

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
FILES = sorted([*ROOT.glob("workflows/**/*.bot"), *ROOT.glob("workflows/*.iter"), *ROOT.glob("invalid/*.bot"),
                *ROOT.glob("diff/**/*.bot")])


def _utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False  # the P010 fixture
    return True


PARSED = [p for p in FILES if _utf8(p) and not parse(p.read_text(), str(p))[1]]


def test_most_fixtures_parse_and_are_checked() -> None:
    assert len(PARSED) >= 100


@pytest.mark.parametrize("path", PARSED, ids=lambda p: str(p.relative_to(ROOT)))
def test_parse_unparse_parse_is_stable(path: Path) -> None:
    text = path.read_text()
    tree, _ = parse(text, str(path))
    printed = unparse(tree)
    again, diags = parse(printed, str(path))
    assert diags == [], [d.format() for d in diags]
    assert canonical_encoding({"x.bot": printed}, main="x.bot") == canonical_encoding({"x.bot": text}, main="x.bot")
    assert unparse(again) == printed


def test_a_value_no_spelling_holds_is_refused() -> None:
    tree, _ = parse('tool t:\n  command: `a "b" c`\nworkflow w:\n  entry: t\n  t -> done\n', "x.bot")
    assert "`a \"b\" c`" in unparse(tree)
    from iterion.dsl import ast
    with pytest.raises(Unwritable):
        from iterion.dsl.unparse import value
        value(ast.Literal('a"`b', tree.span))
