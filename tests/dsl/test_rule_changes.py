"""Issue 12 point 4: the diagnostics table of dsl.md §7 and each rule that changed with it, one
test per behaviour change (severities, renumbered codes, rules dropped or narrowed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.dsl import load_tree, load_workflow
from iterion.dsl.diagnostics import CODES, Severity

INVALID = Path(__file__).resolve().parents[2] / "fixtures" / "invalid"

# dsl.md §7, the severity column (C018 is E, a warning only for an llm router)
WARNINGS = {"C030", "C032", "C037", "C047", "C080", "C082", "C083", "C101", "C105", "C106", "C110", "C111",
            "C112", "C113", "C114"}
ERRORS = {f"C{n:03d}" for n in range(1, 249)} & set(CODES) - WARNINGS


def _diags(src: str, env: dict[str, str] | None = None) -> list[tuple[str, str, int]]:
    result = load_tree({"x.bot": src}, "x.bot", env=env or {})
    return [(d.code, d.severity.value, d.span.line) for d in result.diagnostics]


def test_every_code_has_the_severity_of_the_table() -> None:
    for code in WARNINGS:
        assert CODES[code][0] is Severity.WARNING, code
    for code in ERRORS:
        assert CODES[code][0] is Severity.ERROR, code
    # reserved and retired numbers are never emitted
    assert not {"C045", "C107", "C108", "C109"} & set(CODES)


def test_c016_an_unreachable_node_is_an_error_that_rejects_the_file() -> None:
    result = load_workflow(INVALID / "c016_unreachable.bot", env={})
    assert [(d.code, d.severity) for d in result.diagnostics] == [("C016", Severity.ERROR)]
    assert result.workflow is None


def test_c053_and_c054_replace_the_old_numbers_for_attachments() -> None:
    src = ('attachments:\n  spec: file\nagent a:\n  model: "m"\n'
           '  user: "{{attachments.spec.url}} {{attachments.spec.colour}} {{attachments.logo}}"\n'
           'workflow w:\n  entry: a\n  a -> done\n')
    assert sorted(_diags(src)) == [("C053", "error", 5), ("C054", "error", 5)]


def test_c022_only_for_a_simple_when_on_an_llm_router() -> None:
    head = 'router r:\n  mode: llm\n  model: "m"\nagent a:\n  model: "m"\nagent b:\n  model: "m"\n'
    tail = '  r -> b\n  a -> done\n  b -> done\n'
    simple = head + 'schema s:\n  ok: bool\nworkflow w:\n  entry: r\n  r -> a when ok\n' + tail
    expression = head + 'workflow w:\n  entry: r\n  r -> a when "ok"\n' + tail
    assert [c for c, _, _ in _diags(simple)] == ["C022"]
    assert _diags(expression) == []  # as observed: an expression condition is not reported


def test_c009_only_for_a_node_that_declares_await() -> None:
    base = ('router r:\n  mode: fan_out_all\nagent a:\n  model: "m"\nagent b:\n  model: "m"\n'
            'agent j:\n  model: "m"\n  session: inherit_if_available\n{await_}'
            'workflow w:\n  entry: r\n  r -> a\n  r -> b\n  a -> j\n  b -> j\n  j -> done\n')
    assert _diags(base.format(await_="")) == []  # a convergence point without await: no rule applies
    got = _diags(base.format(await_="  await: wait_all\n"))
    assert [(c, s) for c, s, _ in got] == [("C009", "error")]


def test_the_convergence_await_rule_is_withdrawn() -> None:
    result = load_workflow(INVALID.parent / "workflows" / "converge_without_await.bot", env={})
    assert result.diagnostics == [] and result.workflow is not None


@pytest.mark.parametrize(("effort", "codes"), [
    ('"${EFFORT}"', []),             # env-substituted: checked by nobody until the node runs
    ('"${EFFORT:-medium}"', []),
    ('"$EFFORT"', []),
    ('"extreme"', ["C027"]),         # a quoted value without $ is still checked
    ("extreme", ["C103"]),          # unquoted: an invalid enumerated value (the original's E020, dsl.md 7)
    ("xhigh", []),
])
def test_c027_skips_env_substituted_reasoning_effort(effort: str, codes: list[str]) -> None:
    src = f'agent a:\n  model: "m"\n  reasoning_effort: {effort}\nworkflow w:\n  entry: a\n  a -> done\n'
    assert [c for c, _, _ in _diags(src, env={"EFFORT": "low"})] == codes


def test_c113_within_one_block_only() -> None:
    file_and_workflow = ('vars:\n  n: int = 1\nagent a:\n  model: "m"\n  user: "{{vars.n}}"\n'
                         'workflow w:\n  entry: a\n  vars:\n    n: string = "x"\n  a -> done\n')
    assert _diags(file_and_workflow) == []
    twice = file_and_workflow.replace('  n: int = 1\n', '  n: int = 1\n  n: int = 2\n')
    assert _diags(twice) == [("C113", "warning", 3)]


def test_c010_does_not_count_a_loop_bearing_edge() -> None:
    src = ('agent a:\n  model: "m"\nworkflow w:\n  entry: a\n  a -> a as polish(2)\n  a -> done\n')
    assert _diags(src) == []
    two_plain = src.replace("  a -> a as polish(2)\n", "  a -> a as polish(2)\n  a -> done\n")
    assert [c for c, _, _ in _diags(two_plain)] == ["C010"]


def test_a_tool_text_output_field_is_known_and_underscore_fields_are_exempt() -> None:
    src = ('schema out:\n  ok: bool\nagent a:\n  model: "m"\n  output: out\n'
           'tool t:\n  command: "echo {{outputs.a._session_id}} {{outputs.a._cost_usd}} {{outputs.a.nope}}"\n'
           'workflow w:\n  entry: a\n  a -> t\n  t -> done\n')
    assert _diags(src) == [("C031", "error", 7)]


@pytest.mark.parametrize(("value", "in_place"), [("auto", False), ("none", True), ("per_run", True)])
def test_worktree_auto_or_any_other_name_in_place(value: str, in_place: bool) -> None:
    src = f'agent a:\n  model: "m"\nworkflow w:\n  entry: a\n  worktree: {value}\n  a -> done\n'
    result = load_tree({"x.bot": src}, "x.bot", env={})
    assert result.diagnostics == [] and result.workflow is not None
    assert result.workflow.worktree is not in_place
