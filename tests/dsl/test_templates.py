"""Templates: parsing, references, includes on real files, rendering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iterion.expr import Reference
from iterion.templates import (
    Include,
    TemplateRenderError,
    TemplateSyntaxError,
    expand_includes,
    parse_template,
    render,
    template_includes,
    template_references,
)

SCOPE: dict[str, Any] = {
    "vars": {"target": "README.md", "n": 2, "tags": ["a", "b"]},
    "input": {"topic": "x"},
    "outputs": {"edit": {"stdout": "ok\n", "exit_code": 0}, "review": {"approved": True, "summary": "é"}},
    "outputs_history": {"review": [{"approved": False}, {"approved": True}]},
    "artifacts": {"plan": {"steps": [1]}},
    "attachments": {"spec": {"path": "/a/spec.pdf", "mime": "application/pdf", "size": 12, "sha256": "ff"}},
    "loop": {"fix": {"iteration": 1, "max": 3, "previous_output": {"approved": False, "summary": "no"}}},
    "run": {"id": "run-7"},
}


def test_parse_splits_text_references_and_includes() -> None:
    text = 'Review {{vars.target}} now:\n{{ outputs.edit.stdout }}{{include "a.md"}} {x} }} done'
    pieces = parse_template(text)
    assert pieces == [
        "Review ",
        Reference("vars", ("target",), text.index("vars")),
        " now:\n",
        Reference("outputs", ("edit", "stdout"), text.index("outputs")),
        Include("a.md", text.index('{{include')),
        " {x} }} done",
    ]
    assert template_references(text) == [pieces[1], pieces[3]]
    assert template_includes(text) == [pieces[4]]


def test_plain_text_and_empty_text() -> None:
    assert parse_template("") == []
    assert parse_template("no markers { here }") == ["no markers { here }"]
    assert template_references("${MODEL} stays for the compiler") == []


@pytest.mark.parametrize(("text", "offset", "fragment"), [
    ("a {{vars.x", 2, "unterminated"),
    ("{{}}", 0, "empty template reference"),
    ("{{  }}", 0, "empty template reference"),
    ("x {{foo.bar}}", 4, "unknown"),
    ("{{vars}}", 2, "needs a name"),
    ("{{vars.x + 1}}", 2, "not an expression"),
    ("{{ vars.x y }}", 10, "after a complete expression"),
    ("{{run.name}}", 2, "only run.id"),
    ("{{loop.fix.iteration.x}}", 2, "has no fields"),
    ("{{vars.{{x}}}}", 7, "'{{' inside"),
    ("{{include}}", 0, "quoted relative path"),
    ("{{include a.md}}", 0, "quoted relative path"),
    ('{{include ""}}', 0, "empty"),
    ('{{include "/etc/passwd"}}', 0, "relative"),
    ('{{include "a.md" "b.md"}}', 0, "quoted relative path"),
])
def test_malformed_templates_are_c004_errors(text: str, offset: int, fragment: str) -> None:
    with pytest.raises(TemplateSyntaxError) as info:
        parse_template(text)
    assert info.value.offset == offset, info.value.message
    assert fragment in info.value.message


def test_every_reference_shape_of_the_spec_parses() -> None:
    text = ("{{vars.X}} {{input.X}} {{outputs.NODE}} {{outputs.NODE.FIELD}} {{outputs.NODE.history}} "
            "{{artifacts.NAME}} {{attachments.NAME}} {{attachments.NAME.path}} {{attachments.NAME.mime}} "
            "{{attachments.NAME.size}} {{attachments.NAME.sha256}} {{loop.NAME.iteration}} "
            "{{loop.NAME.max}} {{loop.NAME.previous_output}} {{loop.NAME.previous_output.field}} {{run.id}}")
    assert len(template_references(text)) == 16


def test_render_values() -> None:
    text = ("t={{vars.target}} n={{vars.n}} tags={{vars.tags}} out={{outputs.review}} "
            "s={{outputs.review.summary}} h={{outputs.review.history}} a={{artifacts.plan}} "
            "att={{attachments.spec}} m={{attachments.spec.mime}} sz={{attachments.spec.size}} "
            "i={{loop.fix.iteration}}/{{loop.fix.max}} p={{loop.fix.previous_output.summary}} "
            "r={{run.id}} b={{outputs.review.approved}}")
    assert render(text, SCOPE) == (
        't=README.md n=2 tags=["a","b"] out={"approved":true,"summary":"é"} s=é '
        'h=[{"approved":false},{"approved":true}] a={"steps":[1]} att=/a/spec.pdf m=application/pdf '
        "sz=12 i=1/3 p=no r=run-7 b=true")


def test_render_keeps_an_unresolvable_reference_as_written() -> None:
    # dsl.md 5.2: "stays in the text as written", previous_output "renders empty on the first round";
    # 5.3: a missing value "leaves the {{...}} marker in place" (command), `null` (script)
    text = "hello {{ outputs.ghost.field }} [{{loop.l.previous_output.x}}]"
    assert render(text, SCOPE) == "hello {{ outputs.ghost.field }} []"
    assert render(text, SCOPE, "with") == "hello {{ outputs.ghost.field }} []"
    assert render("echo {{outputs.ghost.field}}", SCOPE, "shell") == "echo {{outputs.ghost.field}}"
    assert render("print({{outputs.ghost.field}})", SCOPE, "program") == "print(null)"


def test_render_refuses_unexpanded_include_and_malformed_text() -> None:
    with pytest.raises(TemplateRenderError, match="not expanded"):
        render('{{include "a.md"}}', SCOPE)
    with pytest.raises(TemplateRenderError, match="unterminated"):
        render("{{vars.target", SCOPE)


def test_expand_includes_nested_relative_to_including_file(tmp_path: Path) -> None:
    (tmp_path / "prompts" / "shared").mkdir(parents=True)
    (tmp_path / "prompts" / "a.md").write_text('A[{{include "shared/b.md"}}] {{vars.target}}\n')
    (tmp_path / "prompts" / "shared" / "b.md").write_text('B[{{include "../../c.md"}}]')
    (tmp_path / "c.md").write_text("C")
    text, files = expand_includes('start {{include "prompts/a.md"}} end', tmp_path)
    assert text == "start A[B[C]] {{vars.target}}\n end"
    assert files == [tmp_path / "prompts" / "a.md", tmp_path / "prompts" / "shared" / "b.md",
                     tmp_path / "c.md"]
    assert render(text, SCOPE) == "start A[B[C]] README.md\n end"


def test_expand_includes_reads_a_repeated_file_once(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("X")
    reads: list[Path] = []

    def read(path: Path) -> str:
        reads.append(path)
        return path.read_text()

    text, files = expand_includes('{{include "x.md"}}{{include "./x.md"}}', tmp_path, read)
    assert text == "XX"
    assert files == reads == [tmp_path / "x.md"]


def test_expand_includes_without_includes_reads_nothing(tmp_path: Path) -> None:
    assert expand_includes("plain {{vars.x}}", tmp_path) == ("plain {{vars.x}}", [])


def test_include_cycle_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text('a {{include "b.md"}}')
    (tmp_path / "b.md").write_text('b {{include "a.md"}}')
    with pytest.raises(TemplateSyntaxError) as info:
        expand_includes('{{include "a.md"}}', tmp_path)
    msg = info.value.message
    assert "include cycle" in msg
    assert f"{tmp_path / 'a.md'} -> {tmp_path / 'b.md'} -> {tmp_path / 'a.md'}" in msg
    assert info.value.path == str(tmp_path / "b.md")


def test_self_include_is_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text('{{include "a.md"}}')
    with pytest.raises(TemplateSyntaxError, match="include cycle"):
        expand_includes('{{include "a.md"}}', tmp_path)


def test_missing_include_and_bad_nested_template(tmp_path: Path) -> None:
    with pytest.raises(TemplateSyntaxError) as info:
        expand_includes('xx {{include "nope.md"}}', tmp_path)
    assert "not found" in info.value.message and info.value.offset == 3
    (tmp_path / "bad.md").write_text("oops {{vars")
    with pytest.raises(TemplateSyntaxError) as info:
        expand_includes('{{include "bad.md"}}', tmp_path)
    assert info.value.path == str(tmp_path / "bad.md") and info.value.offset == 5
    (tmp_path / "bin.md").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TemplateSyntaxError, match="cannot read"):
        expand_includes('{{include "bin.md"}}', tmp_path)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="{}ab .\"'vars.xinclude\n", max_size=40))
def test_arbitrary_text_only_raises_template_errors(text: str) -> None:
    try:
        pieces = parse_template(text)
    except TemplateSyntaxError as exc:
        assert 0 <= exc.offset <= len(text)
        return
    try:
        render(text, SCOPE)
    except TemplateRenderError as exc:
        assert exc.message
    # literal pieces plus markers cover the text: no character is silently dropped
    literal = "".join(p for p in pieces if isinstance(p, str))
    assert len(literal) <= len(text)


def test_relative_target_is_the_one_resolution_rule_for_includes_and_imports() -> None:
    from iterion.dsl.loader import resolve_import
    from iterion.templates import relative_target

    assert relative_target("", "a/./b.md") == "a/b.md"
    assert relative_target("prompts", "../shared/x.md") == "shared/x.md"
    assert relative_target("", "../x.md") == "../x.md"
    assert resolve_import("lib/main.bot", "../common/x.bot") == relative_target("lib", "../common/x.bot") == "common/x.bot"


def test_render_modes_of_the_substitution_rule() -> None:
    """dsl.md 5.3: how each mode writes a value (the end-to-end proof is tests/security/)."""
    scope: dict[str, Any] = {**SCOPE, "vars": {**SCOPE["vars"], "q": "it's", "empty": [], "none": None,
                                               "deep": [["a"], "b"], "bad": "a\x00b"}}
    assert render("x {{vars.q}}", scope, "shell") == "x 'it'\\''s'"
    assert render("{{vars.tags}}|{{vars.empty}}|{{vars.n}}", scope, "shell") == "'a' 'b'||'2'"
    assert render("{{vars.deep}} {{outputs.review}}", scope, "shell") == \
        """'[["a"],"b"]' '{"approved":true,"summary":"é"}'"""
    assert render("{{ vars.none }} {{!vars.none}}", scope, "shell") == "{{ vars.none }} {{!vars.none}}"
    assert render("{{!vars.q}} {{ !vars.tags }}", scope, "shell") == """it's ["a","b"]"""
    assert render("{{vars.q}} {{vars.tags}} {{vars.none}} {{!vars.q}}", scope, "program") == \
        """"it's" ["a","b"] null it's"""
    # prompts keep a raw marker as written; in `with` values `!` has no effect
    assert render("{{!vars.q}} {{vars.q}}", scope) == "{{!vars.q}} it's"
    assert render("{{!vars.q}} {{vars.n}}", scope, "with") == "it's 2"
    # one pass: a value that looks like a marker is never expanded
    assert render("{{vars.m}}", {"vars": {"m": "{{vars.q}}"}}, "shell") == "'{{vars.q}}'"
    with pytest.raises(TemplateRenderError, match="NUL") as info:
        render("echo {{vars.bad}}", scope, "shell")
    assert info.value.reference == "vars.bad"
    with pytest.raises(TemplateRenderError, match="surrogate"):
        render("echo {{!vars.s}}", {"vars": {"s": "a\ud800"}}, "shell")
    assert render("{{vars.s}}", {"vars": {"s": "a\ud800"}}, "program") == '"a\\ud800"'


def test_raw_markers_parse_as_references() -> None:
    from iterion.templates import RawReference

    text = "a {{!vars.x}} {{ ! outputs.n.f }}"
    assert template_references(text) == [RawReference("vars", ("x",), text.index("vars")),
                                         RawReference("outputs", ("n", "f"), text.index("outputs"))]
    with pytest.raises(TemplateSyntaxError, match="empty raw"):
        parse_template("x {{!}}")
    with pytest.raises(TemplateSyntaxError, match="not an expression"):
        parse_template("{{!vars.x + 1}}")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="vars.inputoutsloopiterationmaxrunid_aA9 \t.", max_size=30))
def test_a_plain_reference_reads_as_the_expression_parser_reads_it(body: str) -> None:
    """The plain dotted reference is read without the expression parser (issue 28, scale):
    whatever it accepts, the parser accepts identically, offset included."""
    from iterion import templates
    from iterion.expr import Ref, parse_expr
    stripped = body.strip()
    fast = templates._plain_reference(stripped, 0)
    if fast is None:
        return
    node = parse_expr(stripped, implicit_fields=False)
    assert isinstance(node, Ref) and node.ref == fast


@pytest.mark.parametrize("body", ["vars.and", "loop.fix.bogus", "topic.x", "run.name", "true.x"])
def test_a_reference_the_parser_refuses_is_left_to_the_parser(body: str) -> None:
    from iterion import templates
    from iterion.expr import ExprSyntaxError, parse_expr
    assert templates._plain_reference(body, 0) is None
    with pytest.raises(ExprSyntaxError):
        parse_expr(body, implicit_fields=False)


def test_a_prompt_of_many_markers_reports_each_at_its_line_and_column() -> None:
    """100,000 markers validate in linear time (span_at used to count the newlines of the whole
    prefix per marker); spans stay exact at the first line, inside, and at the last line."""
    from iterion.dsl import load_source
    lines = [f"  line {i} {{{{vars.target}}}} {{{{vars.nope{i}}}}}" for i in range(20_000)]
    src = ('vars:\n  target: string = "x"\nprompt p:\n' + "\n".join(lines)
           + '\nagent a:\n  model: "m"\n  user: p\nworkflow w:\n  entry: a\n  a -> done\n')
    result = load_source(src, file="m.bot", env={})
    got = [(d.code, d.span.line, d.span.column) for d in result.diagnostics]
    assert len(got) == 20_000 and set(c for c, _, _ in got) == {"C033"}
    col = len("  line 0 {{vars.target}} {{") + 1
    assert got[0] == ("C033", 4, col)
    assert got[-1] == ("C033", 4 + 19_999, col + len(str(19_999)) - 1)
