"""Issue 12 points 2 and 3 at compile time: every declaration and block of dsl.md §2 parsed and
checked, diagnostics at their exact line and column, the IR holding what the engine reads."""

from __future__ import annotations

import re
from pathlib import Path

from iterion.dsl import load_tree, load_workflow
from iterion.dsl.blocks import calibration_section, cursor_fragment

ROOT = Path(__file__).resolve().parents[2]
INVALID = ROOT / "fixtures" / "invalid"
WORKFLOWS = ROOT / "fixtures" / "workflows"


def _codes(text: str, env: dict[str, str] | None = None) -> list[tuple[str, int, int]]:
    result = load_tree({"x.bot": text}, "x.bot", env=env or {})
    return [(d.code, d.span.line, d.span.column) for d in result.diagnostics]


# Every code of dsl.md §7: the table, the parse classes, the loading errors.
SPEC_CODES = {
    "C001", "C002", "C003", "C004", "C005", "C006", "C007", "C008", "C009", "C010", "C011", "C012", "C013",
    "C014", "C016", "C017", "C018", "C019", "C020", "C021", "C022", "C023", "C024", "C025", "C026", "C027",
    "C028", "C029", "C030", "C031", "C032", "C033", "C034", "C035", "C036", "C037", "C038", "C039", "C040",
    "C041", "C042", "C043", "C044", "C045", "C046", "C047", "C048", "C050", "C051", "C052", "C053", "C054",
    "C060", "C070", "C071", "C072", "C080", "C081", "C082", "C083", "C084", "C085", "C086", "C100", "C101",
    "C102", "C103", "C104", "C105", "C106", "C107", "C110", "C111", "C112", "C113", "C248", "L001", "L002",
    "L003", "L004", "L005", "P001", "P002", "P003", "P004", "P005", "P006", "P007", "P008", "P009", "P010",
}

# C045 is reserved, C107-C109 retired; C046 (a negative or infinite cost) cannot be written in
# source text (no sign, no exponent: dsl.md §1.6), so no file can show it.
NO_FIXTURE = {"C045", "C046", "C107", "C108", "C109"}


def test_every_code_of_the_spec_has_an_invalid_fixture_with_line_and_column() -> None:
    covered: set[str] = set()
    for p in INVALID.glob("*.bot"):
        head = p.read_bytes().decode("utf-8", errors="replace").splitlines()[:3]
        covered |= {c for line in head for c in re.findall(r"([A-Z]\d{3}) line \d+ col \d+", line)}
    covered |= {"L004", "L005"}  # a bad bundle, an unsafe archive path: built by tests/dsl/test_bundle.py
    missing = SPEC_CODES - NO_FIXTURE - covered
    assert not missing, sorted(missing)


def test_workflow_vars_override_and_attachments_merge() -> None:
    wf = load_workflow(WORKFLOWS / "workflow_scope.bot", env={}).workflow
    assert wf is not None
    assert wf.vars["branch"].default == "release"
    assert wf.vars["depth"].type.value == "string" and wf.vars["depth"].default == "deep"
    assert set(wf.attachments) == {"spec", "logo"} and wf.attachments["logo"].kind == "image"
    planner = wf.nodes["planner"]
    assert planner.provider == "${PLANNER_PROVIDER:-anthropic}"  # expanded when the node runs
    assert planner.interaction_prompt_ref == "escalate" and planner.interaction_prompt
    assert wf.nodes["pick"].provider == "openai" and wf.nodes["confirm"].interaction_model == "m-answer"
    assert all("provider" not in n.extra for n in wf.nodes.values())  # one home: Node.provider


def test_a_duplicate_attachment_across_both_blocks_is_c050() -> None:
    src = ('attachments:\n  spec: file\ntool t:\n  command: "true"\n'
           'workflow w:\n  entry: t\n  attachments:\n    spec: image\n  t -> done\n')
    assert _codes(src) == [("C050", 8, 5)]


def test_every_script_language_maps_to_its_interpreter() -> None:
    wf = load_workflow(WORKFLOWS / "scripts.bot", env={}).workflow
    assert wf is not None
    got = {n: node.language for n, node in wf.nodes.items()}
    assert got == {"plain": "sh", "sh_tool": "sh", "bash_tool": "bash", "js_tool": "node", "node_tool": "node",
                   "py_tool": "python", "python_tool": "python", "python3_tool": "python"}


def test_default_supervisor_model_fills_agents_and_llm_routers() -> None:
    src = ('agent a:\n  readonly: true\nrouter r:\n  mode: llm\n  user: "pick"\ntool x:\n  command: "true"\n'
           'workflow w:\n  entry: a\n  a -> r\n  r -> x\n  r -> done\n  x -> done\n')
    # the agent: C018 error; the llm router: C018 warning (a default model applies at run time)
    assert sorted((c, line) for c, line, _ in _codes(src)) == [("C018", 1), ("C018", 3)]
    result = load_tree({"x.bot": src}, "x.bot", env={"ITERION_DEFAULT_SUPERVISOR_MODEL": "sup/model"})
    assert result.workflow is not None and result.diagnostics == [], result.diagnostics
    assert result.workflow.nodes["a"].model == "sup/model" and result.workflow.nodes["r"].model == "sup/model"
    # §1.7: "without model:" whatever the backend (a named backend still gets the model); a written model wins
    src2 = ('agent a:\n  backend: "claw"\n  readonly: true\nagent b:\n  model: "own/m"\n  readonly: true\n'
            'workflow w:\n  entry: a\n  a -> b\n  b -> done\n')
    wf = load_tree({"x.bot": src2}, "x.bot", env={"ITERION_DEFAULT_SUPERVISOR_MODEL": "sup/model"}).workflow
    assert wf is not None and wf.nodes["a"].model == "sup/model" and wf.nodes["b"].model == "own/m"
    wf = load_tree({"x.bot": src2}, "x.bot", env={}).workflow
    assert wf is not None and wf.nodes["a"].model is None


def test_cursor_resolution_rules() -> None:
    bands = {"bands": {"0.0..0.4": "narrow", "0.41..1.0": "wide"}}
    values = {"values": {"low": "L", "mid": "M", "high": "H"}}
    assert cursor_fragment(bands, 0.8) == "wide" and cursor_fragment(bands, 0) == "narrow"
    assert cursor_fragment(bands, 0.405) is None  # between bands: unresolvable, skipped
    assert cursor_fragment(values, 0.5) == "M" and cursor_fragment(values, 1) == "H"  # floor(v x n), clamped
    assert cursor_fragment(values, "high") == "H" and cursor_fragment(values, "nope") is None
    assert cursor_fragment(values, 1.5) is None
    text = calibration_section({"tone": values, "scrutiny": bands}, {"tone": "low", "scrutiny": 0.1, "x": 1})
    assert text == "## Calibration\n**scrutiny:** narrow\n**tone:** L"
    assert calibration_section({"tone": values}, {"enabled": False, "tone": "low"}) == ""


def test_cursor_value_with_env_is_not_checked_statically() -> None:
    wf = load_workflow(WORKFLOWS / "cursors.bot", env={}).workflow
    assert wf is not None and wf.nodes["gate"].cursors["scrutiny"] == "${GATE_SCRUTINY}"


def test_template_loop_bound_is_kept_for_run_time() -> None:
    wf = load_workflow(WORKFLOWS / "loop_template.bot", env={}).workflow
    assert wf is not None
    loop = wf.loops["passes"]
    assert loop.bound == "{{vars.rounds}} then {{outputs.plan.rounds}}"
    edge = next(e for e in wf.edges if e.loop == "passes")
    assert edge.loop_max is None and edge.loop_bound == loop.bound


def test_template_loop_bound_references_are_resolved_at_run_time_only() -> None:
    # "Checks ... (`when` and loop bounds only as in §3)" (dsl.md 5.1): an unresolvable bound is 0
    # at run time (3.5), not a compile error; a malformed marker still is (C004)
    src = ('tool t:\n  command: "true"\nworkflow w:\n  entry: t\n  t -> t when "again" as l("{{vars.nope}}")\n'
           '  t -> done\n')
    assert _codes(src) == []
    assert [c for c, _, _ in _codes(src.replace("{{vars.nope}}", "{{vars.nope"))] == ["C004"]


def test_when_expression_checks_only_outputs_of_its_source() -> None:
    # "`outputs.SRC.f` references are checked against SRC's schema (C014); bare names are not checked"
    src = ('schema s:\n  n: int\ntool t:\n  command: "true"\n  output: s\nworkflow w:\n  entry: t\n'
           '  t -> done when "outputs.t.m > vars.undeclared and outputs.t._tokens > 0 and later"\n  t -> done\n')
    assert _codes(src) == [("C014", 8, 19)]


def test_when_expressions_with_bare_fields_compile() -> None:
    wf = load_workflow(WORKFLOWS / "expressions.bot", env={}).workflow
    assert wf is not None
    assert [e.condition.expr for e in wf.edges if e.condition is not None][:2] == [
        "approved and blockers == 0", "not approved or blockers > 0"]


def test_a_number_between_two_bands_is_c084_and_skipped_at_run_time() -> None:
    """dsl.md §2.10: with bands "the band containing it wins"; a number in a gap resolves to no
    band, which the original refuses (C084, issue 28). At run time it is skipped (as observed)."""
    src = ('cursor depth:\n  bands:\n    "0.0..0.4": "narrow"\n    "0.5..1.0": "wide"\n'
           'agent a:\n  model: "m"\n  cursors:\n    depth: 0.45\nworkflow w:\n  entry: a\n  a -> done\n')
    assert _codes(src) == [("C084", 8, 12)]
    assert _codes(src.replace("0.45", "0.5")) == []
    assert calibration_section({"depth": {"bands": {"0.0..0.4": "narrow", "0.5..1.0": "wide"}}},
                               {"depth": 0.45}) == ""
    assert [c for c, _, _ in _codes(src.replace("0.45", "1.5"))] == ["C084"]
    assert [c for c, _, _ in _codes(src.replace("0.45", "deep"))] == ["C084"]


def test_c018_is_waived_on_a_host_with_a_detectable_backend(tmp_path: Path) -> None:
    """dsl.md §2.4: missing model and backend is C018 unless ITERION_DEFAULT_SUPERVISOR_MODEL is set
    or a backend credential is detectable (the run-time detection: a claw credential or endpoint,
    the claude CLI). Each case gives its whole environment, so the machine's own does not count."""
    src = 'agent a:\n  user: "go"\nworkflow w:\n  entry: a\n  a -> done\n'
    assert _codes(src) == [("C018", 1, 7)]
    for env in ({"ANTHROPIC_API_KEY": "k"}, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
                {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, {"OPENAI_API_KEY": "k"}):
        result = load_tree({"x.bot": src}, "x.bot", env=env)
        assert result.diagnostics == [] and result.workflow is not None, env
        assert result.workflow.nodes["a"].model is None  # the run chooses (claw: the default supervisor)
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text("#!/bin/sh\nexit 0\n")
    claude.chmod(0o755)
    assert _codes(src, {"PATH": str(claude.parent)}) == []
    assert _codes(src, {"ITERION_CLAUDE_BIN": str(claude)}) == []
    # not credentials: a blank key, a chosen default backend, the claude CLI missing from PATH
    assert _codes(src, {"ANTHROPIC_API_KEY": " "}) == [("C018", 1, 7)]
    assert _codes(src, {"ITERION_DEFAULT_BACKEND": "claw"}) == [("C018", 1, 7)]
    assert _codes(src, {"PATH": str(tmp_path)}) == [("C018", 1, 7)]
    # a written backend: counts as given, "auto" and a ${...} decided at run time included
    for backend in ('"auto"', "auto", '"${B}"', "claw"):
        got = _codes(src.replace('  user: "go"', f'  backend: {backend}\n  user: "go"'))
        assert [c for c, _, _ in got if c == "C018"] == [], backend  # (an unset ${B} is C110, a warning)
    assert _codes(src.replace("  entry: a", '  entry: a\n  default_backend: "auto"')) == []
    # the llm router's warning stays: it says a default model is used, which a credential does not change
    router = ('router r:\n  mode: llm\n  user: "pick"\ntool x:\n  command: "true"\n'
              'workflow w:\n  entry: r\n  r -> x\n  r -> done\n  x -> done\n')
    assert _codes(router, {"ANTHROPIC_API_KEY": "k"}) == [("C018", 1, 8)]


def test_c047_reads_an_auto_node_backend_as_the_workflow_default() -> None:
    """memory: is claw's; a node saying "auto" runs on the workflow's default_backend (§2.4), so
    the warning follows that; left to the run (nothing named), nothing is claimed."""
    src = ('agent a:\n  model: "m"\n  backend: "{node}"\n  memory:\n    enabled: true\n    scope: "repo"\n'
           'workflow w:\n  entry: a\n  default_backend: "{wf}"\n  a -> done\n')
    assert _codes(src.format(node="auto", wf="claude_code")) == [("C047", 4, 3)]
    assert _codes(src.format(node="AUTO", wf="claw")) == []
    assert _codes(src.format(node="Claw", wf="claude_code")) == []
    assert _codes(src.format(node="", wf="auto")) == []
