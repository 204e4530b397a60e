"""Every fixture workflow compiles cleanly, and the IR holds what the engine relies on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iterion.dsl import CompileResult, load_workflow
from iterion.ir import (
    AwaitMode,
    ConditionKind,
    FieldType,
    NodeKind,
    RouterMode,
    Workflow,
)

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "fixtures" / "workflows"
INVALID = ROOT / "fixtures" / "invalid"
ENV = {"MODEL": "claude-test", "DEPLOY_TARGET": "prod", "DEFAULT_BACKEND": "claw"}

VALID = sorted([*WORKFLOWS.glob("*.bot"), *WORKFLOWS.glob("*.iter"), WORKFLOWS / "imports" / "main.bot",
                WORKFLOWS / "bundle_dir"])
EXPECTED_WARNINGS: dict[str, list[str]] = {}


def _load(name: str) -> Workflow:
    result = load_workflow(WORKFLOWS / name, env=ENV)
    assert result.workflow is not None, [d.format() for d in result.diagnostics]
    return result.workflow


def test_there_are_at_least_fifteen_valid_workflows_and_thirty_invalid_ones() -> None:
    assert len(VALID) >= 15
    assert len(list(INVALID.glob("*.bot"))) >= 30


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_fixture_compiles_without_errors(path: Path) -> None:
    result = load_workflow(path, env=ENV)
    codes = [d.code for d in result.diagnostics]
    assert codes == EXPECTED_WARNINGS.get(path.name, []), [d.format() for d in result.diagnostics]
    assert result.workflow is not None
    assert result.workflow.entry in result.workflow.nodes
    assert result.unit.asts, "the parsed files are part of the unit"


def _expectations(path: Path) -> list[tuple[str, int, int | None]]:
    """``CODE line N[ col M]`` items of the comment lines opening the file."""
    head = []
    # a fixture need not be UTF-8 (P010): its comment lines are
    for ln in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        if not ln.startswith("##"):
            break
        head.append(ln)
    return [(c, int(n), int(col) if col else None)
            for c, n, col in re.findall(r"([A-Z]\d{3}) line (\d+)(?: col (\d+))?", "\n".join(head))]


@pytest.mark.parametrize("path", sorted(INVALID.glob("*.bot")), ids=lambda p: p.stem)
def test_invalid_fixture_reports_its_code_at_its_line(path: Path) -> None:
    expected = _expectations(path)
    assert expected, f"{path.name} must say what it expects on its first line"
    assert all(col is not None for _, _, col in expected), f"{path.name}: give the column of each expectation"
    result: CompileResult = load_workflow(path, env={})
    got = [(d.code, d.span.line, d.span.column if col is not None else None)
           for d, col in zip(sorted(result.diagnostics, key=lambda d: (d.code, d.span.line, d.span.column)),
                             [c for _, _, c in sorted(expected, key=lambda e: (e[0], e[1], e[2] or 0))])]
    assert len(result.diagnostics) == len(expected), [d.format() for d in result.diagnostics]
    assert sorted(got, key=str) == sorted(expected, key=str), [d.format() for d in result.diagnostics]
    for d in result.diagnostics:
        assert d.span.file == str(path)
        assert d.message and "\n" not in d.message
    if any(d.severity.value == "error" for d in result.diagnostics):
        assert result.workflow is None


def test_fan_out_region_has_branches_and_join() -> None:
    wf = _load("fan_out.bot")
    region = wf.fan_out_regions["spread"]
    assert region.branches == (("security",), ("style",), ("tests",))
    assert region.join == "merge"
    assert wf.nodes["merge"].await_mode is AwaitMode.WAIT_ALL
    assert wf.budget.max_parallel_branches == 3


def test_nested_fan_out_regions() -> None:
    wf = _load("fan_out_nested.bot")
    outer, inner = wf.fan_out_regions["outer"], wf.fan_out_regions["inner"]
    assert inner.branches == (("lint_py",), ("lint_js",)) and inner.join == "inner_join"
    assert outer.branches[0] == ("inner", "lint_py", "lint_js", "inner_join")
    assert outer.branches[1] == ("build",) and outer.join == "outer_join"
    assert wf.region_of("lint_py") == outer
    assert wf.nodes["outer_join"].await_mode is AwaitMode.BEST_EFFORT


def test_loops_have_bounds_and_closing_edges() -> None:
    wf = _load("tidy.bot")
    loop = wf.loops["fix"]
    assert loop.max == 3
    closing = [wf.edges[i] for i in loop.edges]
    assert [(e.src, e.dst, e.loop_max) for e in closing] == [("review", "edit", 3)]
    assert closing[0].condition is not None and closing[0].condition.kind is ConditionKind.NOT_FIELD


def test_edges_keep_declaration_order_and_index() -> None:
    wf = _load("tidy.bot")
    assert [(e.index, e.src, e.dst) for e in wf.edges] == [
        (0, "edit", "review"), (1, "review", "done"), (2, "review", "edit"), (3, "review", "rejected")]
    assert wf.budget.max_cost_usd == 2.0


def test_prompts_are_resolved_and_named() -> None:
    wf = _load("tidy.bot")
    review = wf.nodes["review"]
    assert review.user_ref == "review_user"
    assert review.user == "Review {{vars.target}} after the edit:\n{{outputs.edit.stdout}}"
    assert review.model == "${MODEL}"  # expanded when the node runs
    assert wf.prompts["review_user"] == review.user
    rejected = wf.nodes["rejected"]
    assert (rejected.kind, rejected.code, rejected.resumable) == (NodeKind.FAIL, "REVIEW_REJECTED", True)


def test_includes_are_inlined_and_listed_in_the_unit() -> None:
    result = load_workflow(WORKFLOWS / "includes.bot", env={})
    assert result.workflow is not None
    system = result.workflow.nodes["coder"].system
    assert system is not None and system.startswith("You are a careful engineer.\n## Rules\n")
    assert "{{include" not in system and system.endswith("Work on {{vars.repo}}.")
    roles = {Path(f.path).name: f.role for f in result.unit.files}
    assert roles == {"includes.bot": "main", "base.md": "include", "rules.md": "include"}


def test_env_is_kept_as_written_by_the_compiler() -> None:
    """dsl.md 1.7: the compiler never expands ${...}; the run does, each property at its time."""
    wf = _load("env.bot")
    assert wf.nodes["deployer"].model == "${MODEL}"
    assert wf.nodes["deployer"].user == "Deploy to ${DEPLOY_TARGET} as {{vars.who}}."
    assert wf.nodes["announce"].command == "echo deployed to ${DEPLOY_TARGET}"
    assert wf.default_backend == "${DEFAULT_BACKEND}"


def test_unset_env_is_a_warning_where_the_property_expands() -> None:
    result = load_workflow(WORKFLOWS / "env.bot", env={"MODEL": "m"})
    assert result.workflow is not None  # warnings only
    warnings = [(d.code, d.span.line, d.span.column) for d in result.diagnostics]
    # the command and default_backend expand at run time; a prompt body never does
    assert warnings == [("C110", 14, 30), ("C110", 18, 21)]
    assert result.workflow.nodes["announce"].command == "echo deployed to ${DEPLOY_TARGET}"


def test_node_properties_compile_to_the_ir() -> None:
    wf = _load("agent_props.bot")
    impl = wf.nodes["implementer"]
    assert impl.backend == "claw" and impl.publish == "patch" and impl.tools == ("read_file", "write_file", "bash")
    assert (impl.tool_max_steps, impl.max_tokens, impl.reasoning_effort) == (50, 8000, "xhigh")
    assert impl.input_schema is not None and impl.input_schema.name == "task"
    assert impl.system_ref == "impl_system" and impl.user == "Go." and impl.user_ref is None
    assert impl.interaction == "llm" and impl.readonly is False
    assert wf.nodes["reviewer"].kind is NodeKind.JUDGE and wf.nodes["reviewer"].readonly
    assert [wf.nodes[n].session for n in ("reviewer", "fixer", "polisher", "closer")] == [
        "artifacts_only", "inherit", "fork", "inherit_if_available"]
    with_edge = next(e for e in wf.edges if e.with_map)
    assert with_edge.with_map == (("note", "approved: {{outputs.reviewer.summary}}"),)


def test_routers_humans_tools_compute_and_fail_nodes() -> None:
    llm = _load("llm_router.bot").nodes["triage"]
    assert (llm.mode, llm.multi, llm.model, llm.system_ref) == (RouterMode.LLM, True, "m-router", "triage_system")
    assert llm.is_llm
    assert _load("round_robin.bot").nodes["rota"].mode is RouterMode.ROUND_ROBIN
    human = _load("human_gate.bot").nodes["gate"]
    assert (human.kind, human.instructions_ref, human.min_answers, human.interaction) == (
        NodeKind.HUMAN, "gate_instructions", 2, "llm_or_human")
    assert human.output_schema is not None
    assert human.output_schema.field("evidence").type is FieldType.FILE  # type: ignore[union-attr]
    assert human.output_schema.field("decision").enum == ("ship", "hold")  # type: ignore[union-attr]
    probe = _load("tool_script.bot").nodes["probe_service"]
    assert probe.language == "python" and probe.script is not None and "## this line" in probe.script
    stats = _load("compute.bot").nodes["stats_of_names"]
    assert stats.exprs["count"] == "length(unique(vars.names))"
    wf = _load("fail_nodes.iter")
    assert wf.nodes["over_budget"].resumable and not wf.nodes["not_actionable"].resumable
    assert wf.nodes["over_budget"].message is not None and "{{outputs.guard.spent}}" in wf.nodes["over_budget"].message


def test_vars_presets_attachments() -> None:
    wf = _load("presets_attachments.bot")
    assert wf.vars["temperature"].type is FieldType.FLOAT and wf.vars["temperature"].default == 0.2
    assert wf.vars["extra"].default == {"depth": 2, "tags": ["x", "y"]}
    assert wf.vars["notes"].has_default is False
    assert wf.presets == {"fast": {"retries": 1, "draft": True},
                          "careful": {"retries": 5, "temperature": 0.0, "reviewers": ["ana", "bo", "cy"]}}
    spec = wf.attachments["spec"]
    assert (spec.kind, spec.required, spec.accept_mime) == ("file", True, ("application/pdf", "text/markdown"))
    assert wf.attachments["mockup"].kind == "image"


def test_extensions_are_kept_not_executed() -> None:
    wf = _load("extensions.bot")
    assert wf.extra["mcp_server"]["github"]["args"] == ["--read-only"]
    assert wf.extra["mcp_server"]["github"]["env"] == {"GITHUB_TOKEN": "${GH_TOKEN}"}  # substituted at launch
    assert wf.extra["mcp_server"]["github"]["inherit_env"] == ["HTTPS_PROXY"]
    assert wf.extra["mcp_server"]["tracker"]["auth"]["type"] == "oauth2"
    assert wf.extra["mcp_server"]["tracker"]["auth"]["scopes"] == ["issues:read"]
    assert wf.extra["cursor"]["tone"]["values"] == {"terse": "One line per finding.", "detailed": "Explain each finding."}
    assert wf.extra["cursor"]["scrutiny"]["bands"]["0.41..1.0"].startswith("Also read")
    assert wf.extra["sandbox"] == "none" and wf.extra["compaction"] == {"threshold": 1.0}
    node = wf.nodes["researcher"]
    assert node.tools == ("read_file", "mcp.github.get_issue", "mcp.github.*", "board.read")
    assert node.extra["mcp"] == {"autoload_project": True, "servers": ["github", "tracker"], "inherit": True}
    assert node.extra["tool_policy"] == ["read_file", "mcp.github.*"]
    assert node.extra["capabilities"] == ["board.read", "board.label"]
    assert node.extra["memory"] == {"enabled": True, "scope": "project", "autoload": ["notes.md"]}
    assert node.extra["sandbox"]["network"] == {"mode": "allowlist", "rules": ["pypi.org"]}
    assert node.cursors == {"scrutiny": 0.8, "tone": "terse"}
    assert node.provider == "anthropic" and node.interaction_model == "m-answers"
    assert wf.worktree is True and wf.default_backend == "claw" and wf.interaction == "none"


def test_workflow_permission_is_kept_not_executed() -> None:
    from iterion.dsl import load_tree

    text = (WORKFLOWS / "extensions.bot").read_text().replace(
        "  mcp:\n    inherit: false\n", '  mcp:\n    inherit: false\n  permission:\n    allow: ["read_file"]\n    ask: ["bash"]\n')
    result = load_tree({"extensions.bot": text}, "extensions.bot", env={})
    assert result.ok, result.diagnostics
    assert result.workflow.extra["permission"] == {"allow": ["read_file"], "ask": ["bash"]}
    # only as a workflow setting: on a node or at the top level it stays unknown
    on_node = text.replace("  tool_max_steps: 20\n", '  tool_max_steps: 20\n  permission: "ask"\n')
    assert on_node != text
    assert [d.code for d in load_tree({"x.bot": on_node}, "x.bot", env={}).diagnostics] == ["P007"]
    top = 'permission:\n  allow: ["x"]\n' + text
    assert [d.code for d in load_tree({"x.bot": top}, "x.bot", env={}).diagnostics] == ["P006"]


def test_imports_build_one_unit() -> None:
    result = load_workflow(WORKFLOWS / "imports" / "main.bot", env={})
    assert result.workflow is not None
    assert set(result.workflow.nodes) == {"analyse", "report"}
    names = [(Path(f.path).name, f.role) for f in result.unit.files]
    assert names == [("main.bot", "main"), ("schemas.bot", "fragment"), ("nodes.bot", "fragment")]
    assert result.workflow.nodes["analyse"].span.file.endswith("lib/nodes.bot")


def test_full_budget_and_workflow_vars() -> None:
    wf = _load("review_loop.bot")
    b = wf.budget
    assert (b.max_parallel_branches, b.max_duration_s, b.max_cost_usd, b.max_tokens, b.max_iterations) == (
        1, 5400.0, 4.5, 200000, 12)
    assert wf.vars["audience"].default == "developers" and wf.vars["strict"].default is True
    assert wf.nodes["critic"].kind is NodeKind.JUDGE and wf.nodes["critic"].reasoning_effort == "high"
