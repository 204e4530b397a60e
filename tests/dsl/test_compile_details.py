"""Compile and validate details on inline sources: imports, includes, references, regions."""

from __future__ import annotations

from pathlib import Path

from iterion.dsl import load_source, load_workflow
from iterion.dsl.values import parse_duration

HEAD = 'schema s:\n  ok: bool\n  n: int\n\n'


def _codes(src: str, **kw: object) -> list[tuple[str, int]]:
    result = load_source(src, env={}, **kw)  # type: ignore[arg-type]
    return [(d.code, d.span.line) for d in result.diagnostics]


def test_import_cycle_is_reported_at_the_import(tmp_path: Path) -> None:
    (tmp_path / "a.bot").write_text('import "b.bot"\nagent x:\n  model: "m"\nworkflow w:\n  entry: x\n  x -> done\n')
    (tmp_path / "b.bot").write_text('## b imports a back\nimport "a.bot"\n')
    result = load_workflow(tmp_path / "a.bot", env={})
    assert [(d.code, Path(d.span.file).name, d.span.line) for d in result.diagnostics] == [("L002", "b.bot", 2)]
    assert "a.bot -> " in result.diagnostics[0].message


def test_include_cycle_and_missing_include(tmp_path: Path) -> None:
    (tmp_path / "one.md").write_text('{{include "two.md"}}\n')
    (tmp_path / "two.md").write_text('{{include "one.md"}}\n')
    (tmp_path / "w.bot").write_text(
        'prompt p:\n  {{include "one.md"}}\nprompt q:\n  {{include "missing.md"}}\n'
        'agent x:\n  model: "m"\n  system: p\n  user: q\nworkflow w:\n  entry: x\n  x -> done\n')
    result = load_workflow(tmp_path / "w.bot", env={})
    got = sorted((d.code, Path(d.span.file).name, d.span.line) for d in result.diagnostics)
    assert got == [("L003", "two.md", 1), ("L003", "w.bot", 4)]
    assert any("include cycle" in d.message for d in result.diagnostics)


def test_references_in_included_files_are_checked_where_they_are(tmp_path: Path) -> None:
    (tmp_path / "inc.md").write_text("line one\nuses {{vars.nope}}\n")
    (tmp_path / "w.bot").write_text('prompt p:\n  {{include "inc.md"}}\nagent x:\n  model: "m"\n  user: p\n'
                                    'workflow w:\n  entry: x\n  x -> done\n')
    result = load_workflow(tmp_path / "w.bot", env={})
    assert [(d.code, Path(d.span.file).name, d.span.line, d.span.column) for d in result.diagnostics] == [
        ("C033", "inc.md", 2, 8)]


def test_template_columns_inside_strings_and_prompt_bodies() -> None:
    src = ('vars:\n  a: string\nprompt p:\n  first\n    {{vars.b}}\nagent x:\n  model: "m"\n  user: p\n'
           '  system: "see {{vars.c}}"\nworkflow w:\n  entry: x\n  x -> done\n')
    result = load_source(src, env={})
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics] == [("C033", 5, 7), ("C033", 9, 18)]


def test_expression_errors_point_inside_the_string() -> None:
    src = (HEAD + 'compute c:\n  output: s\n  expr:\n    ok: "true"\n    n: "1 +* 2"\n'
           'workflow w:\n  entry: c\n  c -> done when "outputs.c.n >= 1"\n  c -> done\n')
    result = load_source(src, env={})
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics] == [("C040", 9, 12)]


def test_exhaustive_conditions_need_no_fallback_and_fallback_covers_expressions() -> None:
    ok = (HEAD + 'agent a:\n  model: "m"\n  output: s\nworkflow w:\n  entry: a\n'
          '  a -> done when ok\n  a -> fail when not ok\n')
    assert _codes(ok) == []
    expr_only = (HEAD + 'agent a:\n  model: "m"\n  output: s\nworkflow w:\n  entry: a\n'
                 '  a -> done when "outputs.a.n > 1"\n')
    assert _codes(expr_only) == [("C012", 10)]


def test_loop_with_declared_edge_is_not_an_undeclared_cycle() -> None:
    src = (HEAD + 'agent a:\n  model: "m"\n  output: s\nagent b:\n  model: "m"\nworkflow w:\n  entry: a\n'
           '  a -> done when ok\n  a -> b when not ok\n  b -> a as again(2)\n')
    result = load_source(src, env={})
    assert result.workflow is not None and result.workflow.loops["again"].edges == (2,)


def test_history_of_a_loop_node_and_reads_from_earlier_nodes_are_fine() -> None:
    src = (HEAD + 'agent a:\n  model: "m"\n  output: s\n  user: "{{outputs.a.history}} {{loop.again.iteration}}"\n'
           'agent b:\n  model: "m"\n  user: "{{outputs.a.n}}"\nworkflow w:\n  entry: a\n'
           '  a -> done when ok\n  a -> b when not ok\n  b -> a as again(2)\n')
    assert _codes(src) == []


def test_unknown_loop_attachment_and_tool_output_field() -> None:
    src = ('tool t:\n  command: "x {{loop.nope.iteration}} {{attachments.spec}}"\n'
           'tool u:\n  command: "{{outputs.t.stdout}} {{outputs.t.result}} {{outputs.t.other}} {{outputs.t._tokens}}"\n'
           'workflow w:\n  entry: t\n  t -> u\n  u -> done\n')
    # C053 replaces C107; a schemaless tool's text output has `result` (dsl.md §2.7); another
    # field is unchecked (C032, W); _ fields are runtime fields, exempt
    assert sorted(_codes(src)) == [("C032", 4), ("C053", 2), ("C106", 2)]


def test_edge_out_of_a_terminal_and_fail_node_as_entry() -> None:
    src = ('fail f:\n  code: MY_FAIL\nagent a:\n  model: "m"\nworkflow w:\n  entry: f\n'
           '  a -> done\n  done -> a\n  f -> a\n')
    # a named fail node IS a valid entry (the spec's "the fail node IS the entry" case); its own
    # edges are still refused and what only it could reach is unreachable; `a -> done`, `done -> a`
    # is a cycle without a loop, C019 as in the original (issue 28)
    assert sorted(_codes(src)) == [("C016", 3), ("C019", 8), ("C112", 8), ("C112", 9)]


def test_entry_must_name_a_declared_node_not_a_builtin_terminal() -> None:
    for entry in ("done", "fail", "nope"):
        src = f'fail f:\n  code: MY_FAIL\nworkflow w:\n  entry: {entry}\n'
        assert ("C008", 4) in _codes(src), entry
    assert [c for c, _ in _codes('fail f:\n  code: MY_FAIL\nworkflow w:\n  entry: f\n')] == []


def test_tool_and_router_property_rules() -> None:
    src = ('tool both:\n  command: "true"\n  script: "b"\n  language: sh\ntool neither:\n  output: s\n'
           'tool nolang:\n  script: "echo"\nrouter r:\n  mode: fan_out_all\n  multi: true\n'
           'router nomode:\n  provider: "anthropic"\nschema s:\n  x: string\n'
           'workflow w:\n  entry: r\n  r -> both\n  r -> neither\n  r -> nolang\n  r -> nomode\n'
           '  nomode -> done\n')
    got = sorted(_codes(src))
    # dsl.md 2.7/2.5: command+script or neither is C004; a script without language is sh; a
    # router without mode is fan_out_all; multi is for llm routers only
    assert got == [("C004", 1), ("C004", 5), ("C023", 11)]
    # a router takes no await, input or output: unknown properties
    bad = 'router r:\n  mode: fan_out_all\n  await: wait_all\n  input: s\nworkflow w:\n  entry: r\n  r -> done\n'
    assert _codes(bad) == [("P007", 3), ("P007", 4)]


def test_fail_code_must_be_upper_snake_and_present() -> None:
    src = 'fail a:\n  code: lower_case\nfail b:\n  message: "x"\nagent x:\n  model: "m"\nworkflow w:\n  entry: x\n  x -> a\n'
    assert sorted(_codes(src)) == [("C016", 3), ("C103", 2), ("C104", 3)]


def test_budget_values() -> None:
    src = ('agent a:\n  model: "m"\nworkflow w:\n  entry: a\n  budget:\n    max_duration: "1h30m"\n'
           '    max_tokens: 1000\n    max_iterations: 5\n    max_cost_usd: 1.5\n  a -> done\n')
    result = load_source(src, env={})
    assert result.workflow is not None
    b = result.workflow.budget
    assert (b.max_duration_s, b.max_tokens, b.max_iterations, b.max_cost_usd) == (5400.0, 1000, 5, 1.5)
    bad = src.replace('"1h30m"', '"soon"')
    assert sorted(_codes(bad)) == [("C103", 6)]
    # numbers have no sign and no exponent (dsl.md 1.6): C046 is not reachable from source text
    assert _codes(src.replace("1.5", "1e999")) == [("P008", 9)]
    assert _codes(src.replace("1.5", "-1")) == [("P003", 9)]
    assert parse_duration("90s") == 90 and parse_duration("2d") == 172800 and parse_duration("5") is None


def test_with_map_input_keys_are_checked_against_the_target() -> None:
    src = ('agent a:\n  model: "m"\nagent b:\n  model: "m"\n  user: "{{input.note}} {{input.other}}"\n'
           'workflow w:\n  entry: a\n  a -> b with { note: "{{outputs.a}}" }\n  b -> done\n')
    # b has no input schema: C034 does not apply (dsl.md §5.1), the original accepts it; a key
    # no edge passes is this project's warning C114 (§7, a C1xx fault the original accepts)
    assert _codes(src) == [("C114", 5)]


def test_duplicate_var_and_workflow_vars() -> None:
    src = ('vars:\n  x: int = 1\nagent a:\n  model: "m"\n  user: "{{vars.x}} {{vars.y}}"\n'
           'workflow w:\n  entry: a\n  vars:\n    y: string = "z"\n    x: int\n  a -> done\n')
    # a workflow var overrides a same-named file var (type and default): no C113 (dsl.md 2.2)
    assert _codes(src) == []
    wf = load_source(src, env={}).workflow
    assert wf is not None and wf.vars["x"].has_default is False and wf.vars["y"].default == "z"
    dup = src.replace("    x: int\n", "    x: int\n    y: int\n")
    assert _codes(dup) == [("C113", 11)]


def test_default_backend_satisfies_agents_without_model() -> None:
    src = 'agent a:\n  readonly: true\nworkflow w:\n  entry: a\n  default_backend: claw\n  a -> done\n'
    assert _codes(src) == []


def test_convergence_on_different_await_nodes_is_accepted() -> None:
    """The convergence/await rule is withdrawn (dsl.md 3.2): no C108/C109."""
    src = ('router r:\n  mode: fan_out_all\ntool x:\n  command: "true"\ntool y:\n  command: "true"\n'
           'tool jx:\n  command: "true"\n  await: wait_all\ntool jy:\n  command: "true"\n  await: wait_all\n'
           'workflow w:\n  entry: r\n  r -> x\n  r -> y\n  x -> jx\n  y -> jy\n  jx -> done\n  jy -> done\n')
    result = load_source(src, env={})
    assert result.diagnostics == []
    assert result.workflow is not None and result.workflow.fan_out_regions["r"].join == "jx"


def test_a_name_declared_in_two_files_of_the_unit_is_c041(tmp_path: Path) -> None:
    (tmp_path / "lib.bot").write_text('agent a:\n  model: "m"\nprompt p:\n  hi\n')
    (tmp_path / "main.bot").write_text('import "lib.bot"\nagent a:\n  model: "m"\nprompt p:\n  hello\n'
                                       'workflow w:\n  entry: a\n  a -> done\n')
    result = load_workflow(tmp_path / "main.bot", env={})
    got = sorted((d.code, Path(d.span.file).name, d.span.line) for d in result.diagnostics)
    assert got == [("C041", "main.bot", 2), ("C041", "main.bot", 4)]
    assert "lib.bot:1" in next(d.message for d in result.diagnostics if d.span.line == 2)


def test_a_prompt_no_node_uses_is_still_checked() -> None:
    src = ('prompt unused:\n  {{vars.nope}} and {{outputs.x..y}}\nagent a:\n  model: "m"\n'
           'workflow w:\n  entry: a\n  a -> done\n')
    assert sorted(_codes(src)) == [("C004", 2)]
    src2 = 'prompt unused:\n  {{vars.nope}}\nagent a:\n  model: "m"\nworkflow w:\n  entry: a\n  a -> done\n'
    assert _codes(src2) == [("C033", 2)]


def test_fan_out_branches_may_share_a_named_fail_node() -> None:
    src = ('schema s:\n  ok: bool\nrouter r:\n  mode: fan_out_all\nagent x:\n  model: "m"\n  output: s\n'
           'agent y:\n  model: "m"\n  output: s\nfail broke:\n  code: BRANCH_BROKE\n'
           'tool j:\n  command: "true"\n  await: best_effort\n'
           'workflow w:\n  entry: r\n  r -> x\n  r -> y\n  x -> j when ok\n  x -> broke when not ok\n'
           '  y -> j when ok\n  y -> broke when not ok\n  j -> done\n')
    result = load_source(src, env={})
    assert result.diagnostics == []
    assert result.workflow is not None
    region = result.workflow.fan_out_regions["r"]
    assert region.join == "j" and region.branches == (("x", "broke"), ("y", "broke"))


def test_prompt_written_in_place_compiles_without_a_ref() -> None:
    src = ('agent a:\n  model: "m"\n  system:\n    Be brief.\n    Target: {{vars.missing}}\n'
           'workflow w:\n  entry: a\n  a -> done\n')
    result = load_source(src, env={})
    assert [(d.code, d.span.line, d.span.column) for d in result.diagnostics] == [("C033", 5, 15)]
    ok = load_source(src.replace("vars.missing", "run.id"), env={})
    assert ok.workflow is not None
    node = ok.workflow.nodes["a"]
    assert node.system == "Be brief.\nTarget: {{run.id}}" and node.system_ref is None


def test_a_property_set_twice_is_reported_at_the_repeat() -> None:
    src = ('agent a:\n  model: "m1"\n  model: "m2"\n'
           'workflow w:\n  entry: a\n  worktree: auto\n  worktree: none\n  a -> done\n')
    result = load_source(src, env={})
    twice = [(d.code, d.span.line, d.message) for d in result.diagnostics]
    assert twice == [("C105", 3, "property 'model' is set twice in agent 'a'; the last value wins"),
                     ("C105", 7, "'worktree' is set twice in workflow 'w'; the last value wins")]
    assert result.workflow is not None  # warnings (dsl.md 7), and the last value wins (dsl.md 2.1)
    assert result.workflow.nodes["a"].model == "m2" and result.workflow.worktree is False
