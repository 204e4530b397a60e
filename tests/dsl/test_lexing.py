"""Lexical rules of dsl.md 1.4-1.7 (strings, raw strings, block scalars, dotted names, env
substitution forms and their timing) and the rule changes of dsl.md 3.2 / 7."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.dsl import ast, load_source, load_tree, load_workflow, parse
from iterion.dsl.canonical import canonical_encoding
from iterion.envsubst import expand_command, expand_launch, expand_node
from tests.conftest import run_cli, write_bot

ROOT = Path(__file__).resolve().parents[2]
WF = ROOT / "fixtures" / "workflows"
TAIL = "\nworkflow w:\n  entry: a\n  a -> done\n"


def _prop(src: str, name: str) -> ast.Value:
    tree, diags = parse(src, "x.bot")
    assert diags == [], diags
    for d in tree.decls:
        if isinstance(d, ast.NodeDecl):
            p = d.prop(name)
            if p is not None:
                return p.value
    raise AssertionError(f"no property {name}")


def _value(src: str, name: str) -> object:
    v = _prop(src, name)
    assert isinstance(v, (ast.Literal, ast.RawText))
    return v.value if isinstance(v, ast.Literal) else v.text


def _codes(src: str) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.column) for d in load_source(src, file="x.bot", env={}).diagnostics]


# --- double-quoted strings ------------------------------------------------------------------


def test_backslashes_are_kept_verbatim_by_default() -> None:
    src = 'tool a:\n  command: "say \\"hi\\" a\\nb \\\\ \\q"\n'
    assert _value(src, "command") == 'say \\"hi\\" a\\nb \\\\ \\q'


def test_a_backslash_at_the_line_end_continues_the_string() -> None:
    src = 'tool a:\n  command: "one \\\n  two"\n  output: o\n'
    assert _value(src, "command") == "one \\\n  two"


@pytest.mark.parametrize("directive", ["## strict-escape: on", "##strict-escape:on", "## strict-escape = on"])
def test_strict_escape_decodes_the_standard_escapes(directive: str) -> None:
    src = f'{directive}\n\ntool a:\n  command: "printf \'a\\tb\\n\' \\"q\\" \\\\ \\r\\0"\n'
    assert _value(src, "command") == "printf 'a\tb\n' \"q\" \\ \r\0"


def test_strict_escape_only_among_the_opening_comment_lines() -> None:
    src = 'tool a:\n  command: "a\\tb"\n## strict-escape: on\n'
    assert _value(src, "command") == "a\\tb"
    # other string forms are unaffected
    src = '## strict-escape: on\ntool a:\n  command: `a\\tb`\n'
    assert _value(src, "command") == "a\\tb"


def test_bad_escape_in_strict_mode_is_p009_at_the_backslash() -> None:
    assert _codes('## strict-escape: on\nagent a:\n  model: "m\\x"' + TAIL) == [("P009", 3, 12)]


def test_unterminated_string_is_p004_at_its_opening_quote() -> None:
    assert _codes('agent a:\n  model: "m' + TAIL) == [("P004", 2, 10)]


# --- raw strings and block scalars -----------------------------------------------------------


def test_backtick_strings_span_lines_without_escapes() -> None:
    src = 'tool a:\n  command: `node -e \'console.log("x\\n")\'\nsecond line`\n  output: o\n'
    assert _value(src, "command") == 'node -e \'console.log("x\\n")\'\nsecond line'
    # the property after a multi-line raw string is still parsed
    assert isinstance(_prop(src, "output"), ast.Ident)


def test_block_scalar_value_as_specified() -> None:
    src = ("tool package:\n  script: |\n    tar -czf out.tgz dist\n    echo '{\"archive\": \"out.tgz\"}'\n"
           "  output: package_result\n")
    assert _value(src, "script") == 'tar -czf out.tgz dist\necho \'{"archive": "out.tgz"}\'\n'
    assert isinstance(_prop(src, "output"), ast.Ident)


def test_block_scalar_keeps_deeper_indent_blank_lines_and_comment_lines() -> None:
    src = "tool a:\n  script: |  ## a comment after the bar\n    a\n      b\n\n    ## c\n\n  output: o\n"
    assert _value(src, "script") == "a\n  b\n\n## c\n\n"


def test_block_scalar_runs_to_the_end_of_the_file_and_may_be_empty() -> None:
    assert _value("tool a:\n  script: |\n    x\n    y", "script") == "x\ny\n"
    assert _value("tool a:\n  script: |\n", "script") == ""


def test_a_tab_indented_block_scalar_ends_at_a_line_indented_less() -> None:
    # a tab may indent a block scalar (dsl.md 1.2); the workflow below is not swallowed
    src = "tool a:\n  language: python\n  script: |\n\timport sys\n\t\tprint(1)\n" + TAIL
    assert _value(src, "script") == "import sys\n\tprint(1)\n\n"  # TAIL opens with a blank line
    assert _codes(src) == []


def test_block_scalar_spans_map_back_to_the_file() -> None:
    src = 'tool a:\n  script: |\n    echo {{vars.nope}}\n' + TAIL.replace("entry: a", "entry: a")
    assert _codes(src) == [("C033", 3, 12)]


def test_a_pipe_elsewhere_is_an_unexpected_character() -> None:
    assert _codes('agent a:\n  model: "m" |' + TAIL) == [("P003", 2, 14)]


# --- names, numbers ---------------------------------------------------------------------------


def test_dotted_and_wildcard_names_in_tool_lists() -> None:
    src = 'agent a:\n  model: "m"\n  tools: [read_file, mcp.github.get_issue, mcp.github.*, board.read]\n'
    v = _prop(src, "tools")
    assert isinstance(v, ast.ListValue)
    assert [x.name for x in v.items if isinstance(x, ast.Ident)] == [
        "read_file", "mcp.github.get_issue", "mcp.github.*", "board.read"]


def test_a_dotted_name_is_not_a_property_or_node_name() -> None:
    assert _codes('agent a:\n  model: "m"\n  mcp.servers: [x]' + TAIL) == [("P008", 3, 3)]


def test_numbers_have_no_sign_and_no_exponent() -> None:
    assert _codes('agent a:\n  model: "m"\n  max_tokens: -1' + TAIL) == [("P003", 3, 15)]
    hint = load_source('agent a:\n  model: "m"\n  max_tokens: -1' + TAIL).diagnostics[0].hint
    assert hint == "negative numbers cannot be written"


def test_a_bare_value_with_a_dash_is_told_to_be_quoted() -> None:
    """``model: gpt-5`` is a P003 (a '-' outside ``->``), and the hint says to quote the value."""
    for bare in ("gpt-5", "anthropic/claude-3-5-sonnet", "o3-mini.2"):
        result = load_source(f"agent a:\n  model: {bare}" + TAIL)
        assert [(d.code, d.span.line) for d in result.diagnostics] == [("P003", 2)]
        first = "/" if "/" in bare else "-"  # the first character the lexer stops at
        assert result.diagnostics[0].hint == f'a value with a "{first}" in it is a string: quote it, e.g. "{bare}"'
    assert _codes('agent a:\n  model: "m"\n  max_tokens: 1e3' + TAIL) == [("P008", 3, 15)]


def test_tabs_between_tokens_are_fine_but_not_in_indentation() -> None:
    assert _codes('agent a:\n  model:\t"m"' + TAIL) == []
    assert _codes('agent a:\n\tmodel: "m"' + TAIL)[0][:2] == ("P002", 2)


# --- env substitution: never by the compiler, each form at its time ---------------------------


def test_the_compiler_keeps_env_references_as_written() -> None:
    wf = load_workflow(WF / "lexical.bot", env={"WRITER_MODEL": "x", "USER": "u"}).workflow
    assert wf is not None
    assert wf.nodes["writer"].model == "${WRITER_MODEL:-${TEAM_MODEL:-anthropic/claude-sonnet-4-6}}"
    assert wf.nodes["writer"].reasoning_effort == "${WRITER_EFFORT:-medium}"  # no C027 on it
    assert wf.nodes["shout"].command == "printf 'a\\tb\\n' $HOME ${NAME:-x}"
    assert wf.vars["who"].default == "$USER"


def test_node_time_expansion() -> None:
    env = {"A": "a", "EMPTY": ""}
    assert expand_node("${A}", env) == "a"
    assert expand_node("${NOPE:-d}", env) == "d"
    assert expand_node("${EMPTY:-d}", env) == "d"  # unset or empty
    assert expand_node("${NOPE:-${EMPTY:-${A:-z}}}", env) == "a"
    assert expand_node("${NOPE:-${ALSO:-anthropic/claude}}", env) == "anthropic/claude"
    assert expand_node("x-$A-$NOPE.", env) == "x-a-."
    assert expand_node("${unclosed", env) == "${unclosed"


def test_command_time_expansion() -> None:
    env = {"A": "a", "EMPTY": ""}
    assert expand_command("${A} ${NOPE:-d} ${EMPTY:-d}", env) == "a d "  # default only when unset
    assert expand_command("${NOPE} ${p.name} $A", env) == "${NOPE} ${p.name} $A"


def test_launch_time_expansion() -> None:
    env = {"A": "a"}
    assert expand_launch("$A/${A}/$NOPE/${A:-d}", env) == "a/a//"


def test_a_tool_command_expands_braced_env_before_templates(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        vars:
          word: string = "w"
        tool t:
          command: "printf %s ${ITERION_TEST_LEX:-dflt}-${ITERION_TEST_LEX_SET}-${ITERION_TEST_UNSET}-{{vars.word}}-$((1+1)) > out.txt"
        workflow w:
          entry: t
          t -> done
    """)
    proc = run_cli("run", str(bot), cwd=ws, env={"ITERION_TEST_LEX_SET": "set"})
    assert proc.returncode == 0, proc.stderr
    # the default, the set value, an unset reference left verbatim (the shell then expands it to
    # nothing), the template quoted, and $((...)) left to the shell
    assert (ws / "out.txt").read_text() == "dflt-set--w-2"


# --- rule changes of dsl.md 3.2 and 7 ---------------------------------------------------------


def test_c010_counts_only_plain_edges() -> None:
    base = 'agent a:\n  model: "m"\nagent b:\n  model: "m"\nworkflow w:\n  entry: a\n  b -> done\n'
    assert _codes(base + "  a -> a as again(2)\n  a -> b\n") == []
    assert [c for c, *_ in _codes(base + "  a -> b\n  a -> done\n")] == ["C010"]


def test_c019_only_when_no_endpoint_of_the_back_edge_touches_a_loop() -> None:
    assert load_workflow(WF / "rules_as_specified.bot", env={}).diagnostics == []
    src = ('schema s:\n  ok: bool\nagent a:\n  model: "m"\n  output: s\nagent b:\n  model: "m"\n'
           "workflow w:\n  entry: a\n  a -> done when ok\n  a -> b when not ok\n  b -> a\n")
    assert _codes(src) == [("C019", 12, 3)]


def test_workflow_vars_override_file_vars_without_c113() -> None:
    wf = load_workflow(WF / "rules_as_specified.bot", env={}).workflow
    assert wf is not None and wf.vars["mode"].type.value == "int" and wf.vars["mode"].default == 3
    src = 'vars:\n  n: int = 1\n  n: int = 2\nagent a:\n  model: "m"' + TAIL
    result = load_source(src, env={})
    assert [(d.code, d.severity.value) for d in result.diagnostics] == [("C113", "warning")]
    assert result.workflow is not None and result.workflow.vars["n"].default == 2  # the last wins


def test_no_c027_on_an_env_substituted_reasoning_effort() -> None:
    ok = 'agent a:\n  model: "m"\n  reasoning_effort: "${E:-turbo}"' + TAIL
    assert _codes(ok) == []
    assert _codes(ok.replace("${E:-turbo}", "turbo")) == [("C027", 3, 21)]


def test_underscore_runtime_fields_skip_c031_and_c032() -> None:
    src = ('schema s:\n  x: string\nagent a:\n  model: "m"\n  output: s\nagent b:\n  model: "m"\n'
           '  user: "{{outputs.a._session_id}} {{outputs.c._tokens}} {{outputs.a.y}}"\nagent c:\n  model: "m"\n'
           "workflow w:\n  entry: c\n  c -> a\n  a -> b\n  b -> done\n")
    assert [c for c, *_ in _codes(src)] == ["C031"]


def test_property_twice_keeps_the_last_value_with_a_warning() -> None:
    result = load_source('agent a:\n  model: "one"\n  model: "two"' + TAIL, env={})
    assert [(d.code, d.severity.value) for d in result.diagnostics] == [("C105", "warning")]
    assert result.workflow is not None and result.workflow.nodes["a"].model == "two"


def test_duplicate_top_level_block_keeps_the_first() -> None:
    tree, diags = parse('vars:\n  a: int = 1\nvars:\n  b: int = 2\n', "x.bot")
    assert [(d.code, d.span.line) for d in diags] == [("P008", 3)]
    assert [v.name for d in tree.decls if isinstance(d, ast.VarsDecl) for v in d.vars] == ["a"]


# --- canonical encoding of the new forms ------------------------------------------------------


def test_new_lexical_forms_are_stable_through_parse_and_canonical() -> None:
    text = (WF / "lexical.bot").read_text()
    first = canonical_encoding({"lexical.bot": text}, main="lexical.bot")
    assert canonical_encoding({"lexical.bot": text}, main="lexical.bot") == first
    # a string spelled with backticks or double quotes is the same value
    one = 'tool a:\n  command: "ls -la"\n' + TAIL.replace("entry: a", "entry: a")
    assert canonical_encoding({"x.bot": one}, main="x.bot") == canonical_encoding(
        {"x.bot": one.replace('"ls -la"', "`ls -la`")}, main="x.bot")
    # an edit inside a block scalar, of a dotted list item or of a verbatim backslash is a change
    for old, new in (("tar -czf out.tgz dist", "tar -cjf out.tbz dist"), ("mcp.github.*", "mcp.gitlab.*"),
                     ('\\"hi\\"', "\\'hi\\'")):
        assert old in text
        changed = text.replace(old, new)
        assert canonical_encoding({"lexical.bot": changed}, main="lexical.bot") != first, old


def test_a_leading_bom_is_dropped_and_crlf_reads_as_lf() -> None:
    src = '\ufeffagent a:\r\n  model: "m"\r\n  user: "a\\b"\r\nworkflow w:\r\n  entry: a\r\n  a -> done\r\n'
    result = load_tree({"x.bot": src}, "x.bot", env={})
    assert result.diagnostics == [] and result.workflow is not None
    assert result.workflow.nodes["a"].user == "a\\b"


def test_any_deeper_indentation_opens_a_level() -> None:
    two = ('schema v:\n  ok: bool\nagent a:\n  model: "m"\n  output: v\n  compaction:\n    threshold: 0.8\n'
           'workflow w:\n  entry: a\n  budget:\n    max_cost_usd: 1\n  a -> done when ok\n  a -> a when not ok as r(2)\n')
    four = "\n".join(" " * (2 * (len(ln) - len(ln.lstrip(" ")))) + ln.lstrip(" ") for ln in two.split("\n"))
    uneven = two.replace("  model", "   model").replace("  output", "   output").replace(
        "  compaction:\n    threshold", "   compaction:\n         threshold")
    base = canonical_encoding({"x.bot": two}, main="x.bot")
    for text in (four, uneven):
        result = load_tree({"x.bot": text}, "x.bot", env={})
        assert result.diagnostics == [], [d.format() for d in result.diagnostics]
        assert canonical_encoding({"x.bot": text}, main="x.bot") == base
    # a dedent must land on an enclosing level
    bad = load_tree({"x.bot": four.replace('    output: v', '  output: v')}, "x.bot", env={})
    assert [(d.code, d.span.line, d.span.column) for d in bad.diagnostics] == [("P001", 5, 3)]


def test_more_than_a_hundred_levels_is_p008() -> None:
    deep = "sandbox:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(101)) + " " * 102 + "x: y\n"
    codes = {(d.code) for d in load_tree({"x.bot": deep}, "x.bot", env={}).diagnostics}
    assert "P008" in codes


def test_a_source_over_10_mib_is_p008_and_10_mib_exactly_loads() -> None:
    # dsl.md 1.1 "at most 10 MiB"; 7 "size or nesting limit → P008"
    head = 'tool a:\n  command: "true"\n' + TAIL.lstrip("\n")
    exact = head + "#" * (10 * 1024 * 1024 - len(head) - 1) + "\n"
    assert len(exact.encode()) == 10 * 1024 * 1024
    assert _codes(exact) == []
    assert _codes(exact + "\n") == [("P008", 1, 1)]
    assert _codes(head + "é" * (5 * 1024 * 1024)) == [("P008", 1, 1)]  # bytes, not characters
