"""The `.bot` parser: tree shape, spans, raw bodies, comments, and parse errors at the right place."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from iterion.dsl import ast, parse
from iterion.ir import Span

SOURCE = """\
## a comment at the top
vars:
  target: string = "README.md"
  ## a comment between vars
  tags: string[] = ["a", "b"]

schema verdict:
  approved: bool
  level: string [enum: "low", "high"]

prompt review_user:
  Review {{vars.target}}.

  ## Usage  (markdown, not a comment: it is inside a prompt body)
  {{outputs.edit.stdout}}

agent review:
  model: "${MODEL}"
  output: verdict
  user: review_user
  tools: [read_file, "web.search"]

workflow tidy:
  entry: review
  ## a comment among edges
  review -> done when approved
  review -> review when not approved as fix(3) with {
    note: "again",
    level: "{{outputs.review.level}}"
  }
  review -> fail when "outputs.review.level == 'high'"
"""


def _walk(node: Any):
    if dataclasses.is_dataclass(node) and not isinstance(node, Span):
        yield node
        for f in dataclasses.fields(node):
            yield from _walk(getattr(node, f.name))
    elif isinstance(node, tuple):
        for item in node:
            yield from _walk(item)


def test_parses_every_top_level_form_without_diagnostics() -> None:
    tree, diags = parse(SOURCE, "t.bot")
    assert diags == []
    kinds = [type(d).__name__ for d in tree.decls]
    assert kinds == ["VarsDecl", "SchemaDecl", "PromptDecl", "NodeDecl", "WorkflowDecl"]


def test_every_ast_node_has_a_span_and_comments_are_not_kept() -> None:
    tree, _ = parse(SOURCE, "t.bot")
    nodes = list(_walk(tree))
    assert len(nodes) > 30
    for n in nodes:
        assert isinstance(getattr(n, "span", None), Span), type(n).__name__
    texts = [n.value for n in nodes if isinstance(n, ast.Literal) and isinstance(n.value, str)]
    assert not any("a comment" in t for t in texts)


def test_spans_point_at_the_declaring_token() -> None:
    tree, _ = parse(SOURCE, "t.bot")
    vars_decl, schema, prompt, agent, wf = tree.decls
    assert isinstance(vars_decl, ast.VarsDecl)
    assert vars_decl.vars[1].name == "tags" and vars_decl.vars[1].span == Span("t.bot", 5, 3)
    assert vars_decl.vars[1].type.name == "string[]"
    assert isinstance(schema, ast.SchemaDecl) and schema.fields[1].enum is not None
    assert [v.value for v in schema.fields[1].enum.values] == ["low", "high"]
    assert isinstance(agent, ast.NodeDecl) and agent.name_span == Span("t.bot", 17, 7)
    model = agent.prop("model")
    assert model is not None and model.value == ast.Literal("${MODEL}", Span("t.bot", 18, 10))
    assert isinstance(wf, ast.WorkflowDecl)
    assert [e.span.line for e in wf.edges] == [26, 27, 31]


def test_prompt_body_is_raw_text_with_common_indent_removed() -> None:
    tree, _ = parse(SOURCE, "t.bot")
    prompt = tree.decls[2]
    assert isinstance(prompt, ast.PromptDecl)
    assert prompt.body.text == (
        "Review {{vars.target}}.\n\n## Usage  (markdown, not a comment: it is inside a prompt body)\n"
        "{{outputs.edit.stdout}}"
    )
    assert prompt.body.span == Span("t.bot", 12, 3)


def test_the_first_body_line_fixes_the_indentation_of_a_prompt() -> None:
    """dsl.md §1.5: deeper lines keep their extra spaces, blank lines inside are kept, a line
    indented less ends the body (issue 28: it used to be the least indented line that counted,
    so the text changed)."""
    src = "prompt p:\n\n    first\n      deeper\n\n    last\n\nagent a:\n  model: \"m\"\n"
    tree, diags = parse(src, "p.bot")
    assert diags == []
    prompt = tree.decls[0]
    assert isinstance(prompt, ast.PromptDecl)
    assert prompt.body == ast.RawText("first\n  deeper\n\nlast", Span("p.bot", 3, 5), 4)
    short = "prompt p:\n    first\n  less\n   and more\nagent a:\n  model: \"m\"\n"
    tree, diags = parse(short, "p.bot")
    assert [(d.code, d.span.line, d.span.column) for d in diags] == [("P001", 3, 3)]
    prompt = tree.decls[0]
    assert isinstance(prompt, ast.PromptDecl) and prompt.body.text == "first"
    assert isinstance(tree.decls[1], ast.NodeDecl)  # one mistake, one message: the agent still parses


def test_edges_carry_conditions_loops_and_multiline_with_maps() -> None:
    tree, _ = parse(SOURCE, "t.bot")
    wf = tree.decls[-1]
    assert isinstance(wf, ast.WorkflowDecl)
    first, second, third = wf.edges
    assert first.when is not None and (first.when.kind, first.when.field) == ("field", "approved")
    assert second.when is not None and second.when.kind == "not_field"
    assert second.loop == ast.LoopClause("fix", 3, Span("t.bot", 27, 41))
    assert second.with_map is not None
    assert [(e.key, e.value.value) for e in second.with_map.entries] == [  # type: ignore[union-attr]
        ("note", "again"), ("level", "{{outputs.review.level}}")]
    assert third.when is not None and third.when.expr is not None
    assert third.when.expr.value == "outputs.review.level == 'high'"


def test_script_body_is_raw_and_keeps_hash_lines() -> None:
    src = 'tool t:\n  language: python\n  script:\n    import sys\n    ## kept\n\n    print(1)\n  output: s\n'
    tree, diags = parse(src, "s.bot")
    assert diags == []
    node = tree.decls[0]
    assert isinstance(node, ast.NodeDecl)
    script = node.prop("script")
    assert script is not None and isinstance(script.value, ast.RawText)
    assert script.value.text == "import sys\n## kept\n\nprint(1)"
    assert node.prop("output") is not None


def test_prompt_text_may_be_written_in_place() -> None:
    tree, diags = parse('agent a:\n  system:\n    You are kind.\n    ## Rules\n  model: "m"\n', "p.bot")
    assert diags == []
    node = tree.decls[0]
    assert isinstance(node, ast.NodeDecl)
    system = node.prop("system")
    assert system is not None and system.value == ast.RawText("You are kind.\n## Rules", Span("p.bot", 3, 5), 4)


def test_extension_declarations_are_kept() -> None:
    src = 'mcp_server gh:\n  command: "gh-mcp"\n  env:\n    A: "1"\ncursor c:\n  scope: "x"\n'
    tree, diags = parse(src, "e.bot")
    assert diags == []
    assert [(d.keyword, d.name) for d in tree.decls] == [  # type: ignore[union-attr]
        ("mcp_server", "gh"), ("cursor", "c")]


def test_shared_blocks_are_not_top_level_declarations() -> None:
    # dsl.md 2.1 lists the top-level declarations; sandbox/memory/... live in nodes or the workflow
    _, diags = parse('sandbox:\n  image: "py"\nmemory: "file"\n', "e.bot")
    assert [(d.code, d.span.line, d.span.column) for d in diags] == [("P006", 1, 1), ("P006", 3, 1)]


def test_import_declaration() -> None:
    tree, diags = parse('import "lib/x.bot"\n', "i.bot")
    assert diags == [] and tree.decls == (ast.ImportDecl("lib/x.bot", Span("i.bot", 1, 1)),)


@pytest.mark.parametrize(
    ("src", "code", "line", "col", "words"),
    [
        ('agent a:\n    model: "m"\n  user: "x"\n', "P001", 3, 3, "expected 4 spaces"),  # a dedent between levels
        ('agent a:\n  model: "m"\n      tools: []\n', "P001", 3, 7, "only a line ending with ':'"),
        ('  agent a:\n', "P001", 1, 3, "at the top level"),
        ('agent a:\n\tmodel: "m"\n', "P002", 2, 1, "tab"),
        ('agent a:\n  model: "m" % 2\n', "P003", 2, 14, "unexpected character '%'"),
        ('agent a:\n  model: "open\n', "P004", 2, 10, "unterminated string"),
        ('agent a:\n  tools: [a, b\n', "P005", 2, 10, "never closed"),
        # an unclosed with map: the next edge is a new statement, not an entry (one line lost)
        ('workflow w:\n  a -> b with { x: "1"\n\n  b -> done\n', "P005", 2, 15, "never closed"),
        ('schema e:\nagent a:\n  model: "m"\n', "P008", 1, 10, "no line is indented under it"),
        ('agnet a:\n', "P006", 1, 1, "did you mean 'agent'"),
        ('a -> b\n', "P006", 1, 1, "edges go inside 'workflow NAME:'"),
        ('agent a:\n  modle: "m"\n', "P007", 2, 3, "unknown property 'modle' in agent 'a'"),
        ('tool t:\n  command: "x"\n  colour: red\n', "P007", 3, 3, "in tool 't'"),
        ('workflow w:\n  entry: a\n  a -> b when\n', "P008", 3, 14, "expected a bool field"),
        ('workflow w:\n  a -> b as loop\n', "P008", 2, 17, "expected '('"),
        ('workflow w:\n  a -> b as loop(x)\n', "P008", 2, 18, "loop bound"),
        ('workflow w:\n  a -> b when ok when ok\n', "P008", 2, 18, "duplicate 'when'"),
        ('workflow w:\n  entry a\n', "P006", 2, 3, "unknown statement"),
        ('schema s:\n  x: string [enum "a"]\n', "P008", 2, 19, "expected ':' after 'enum'"),
        ('schema s:\n  x: string (1)\n', "P008", 2, 13, "'[enum: ...]'"),
        ('## strict-escape: on\nagent a:\n  model: "a\\qb"\n', "P009", 3, 12, "unknown escape"),
        ('vars:\n  n: int 3\n', "P008", 2, 10, "'= default'"),
        ('agent a:\n  model: 12abc\n', "P008", 2, 10, "malformed number"),
        ('agent a:\n  model: "m"\n  tools: [a,, b]\n', "P008", 2 + 1, 13, "expected a value"),
        ('agent:\n', "P008", 1, 6, "expected a name after 'agent'"),
        ('prompt p\n', "P008", 1, 9, "expected ':'"),
    ],
)
def test_parse_errors_point_at_the_right_place(src: str, code: str, line: int, col: int, words: str) -> None:
    _, diags = parse(src, "bad.bot")
    assert diags, "expected a diagnostic"
    d = diags[0]
    assert (d.code, d.span.line, d.span.column) == (code, line, col), d.format()
    assert words in d.message + (d.hint or "")


def test_one_bad_line_does_not_hide_the_rest() -> None:
    src = 'agent a:\n  model: "m\n  tools: [x]\nagnet b:\n  model: "m"\nagent c:\n  model: "m"\n'
    tree, diags = parse(src, "r.bot")
    assert [d.code for d in diags] == ["P004", "P006"]
    names = [d.name for d in tree.decls if isinstance(d, ast.NodeDecl)]
    assert names == ["a", "c"]
