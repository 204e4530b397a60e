"""The declaration diff, one test per row of the `rewind --auto` table and then some."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion.dsl.canonical import DeclKey
from iterion.dsl.diff import ChangeKind, UnitDiff, diff_units
from iterion.dsl.digest import workflow_digest

REPO = Path(__file__).resolve().parents[2]
FULL = (REPO / "fixtures" / "diff" / "full.bot").read_text()


def _diff(old: str, new: str) -> UnitDiff:
    return diff_units({"w.bot": old}, {"w.bot": new})


def _edit(old: str, new: str, text: str = FULL) -> UnitDiff:
    assert old in text, old
    return _diff(text, text.replace(old, new, 1))


# --- no change ---------------------------------------------------------------------------


def test_comment_only_edit_is_no_change() -> None:
    edited = "## header comment\n" + FULL.replace("workflow tidy:", "## the graph\nworkflow tidy:").replace(
        "  plan -> split\n", "  ## fan out after planning\n  plan -> split\n")
    d = _diff(FULL, edited)
    assert d.empty and d.changes == [] and d.impacted == {}


def test_line_shift_and_reordering_is_no_change() -> None:
    head, _, rest = FULL.partition("schema verdict:")
    schema_block, _, tail = ("schema verdict:" + rest).partition("schema plan_out:")
    shifted = head + "\n\n\n" + "schema plan_out:" + tail + "\n" + schema_block
    assert shifted != FULL
    assert _diff(FULL, shifted).empty


def test_identical_sources_are_no_change() -> None:
    assert _diff(FULL, FULL).empty


# --- a node's own property -> that node --------------------------------------------------


@pytest.mark.parametrize(("old", "new", "node", "prop"), [
    ('  model: "${MODEL}"\n  system: plan_system', '  model: "gpt-x"\n  system: plan_system', "plan", "model"),
    ('tools: ["read", "grep"]', 'tools: ["read"]', "plan", "tools"),
    ("  reasoning_effort: high\n", "  reasoning_effort: low\n", "plan", "reasoning_effort"),
    ("echo '## Usage' >>", "echo '## Install' >>", "edit", "command"),
    ("    echo linting", "    echo checking", "lint", "script"),
    ('summary: "join(outputs.plan.steps, \', \')"', 'summary: "join(outputs.plan.steps, \'; \')"', "score", "expr"),
    ("  output: verdict\n  user: review_user\n  await: wait_all",
     "  output: plan_out\n  user: review_user\n  await: wait_all", "review", "output"),
    ("  interaction: human\n", "  interaction: llm\n", "approve", "interaction"),
    ("mode: fan_out_all", "mode: round_robin", "split", "mode"),
])
def test_node_property_maps_to_that_node(old: str, new: str, node: str, prop: str) -> None:
    d = _edit(old, new)
    assert [c.key for c in d.changes] == [DeclKey("node", node)]
    assert d.changes[0].kind is ChangeKind.MODIFIED
    assert f"property {prop!r} changed" in d.changes[0].detail
    assert list(d.impacted) == [node]


def test_added_property_and_kind_change_are_reported() -> None:
    d = _edit('tool edit:\n  command: "echo', 'tool edit:\n  await: best_effort\n  command: "echo')
    assert d.changes[0].detail == "property 'await' added"
    d = _edit("judge review:", "agent review:")
    assert d.changes[0].detail == "kind judge -> agent"
    assert list(d.impacted) == ["review"]


def test_fail_node_edit_maps_to_it_and_to_the_nodes_leading_to_it() -> None:
    d = _edit('"review refused: {{outputs.review.summary}}"', '"refused: {{outputs.review.summary}}"')
    assert list(d.impacted) == ["approve", "rejected"]
    assert d.impacted["approve"] == ["leads to the edited fail node rejected"]


# --- shared prompt / schema / include -> every referencing node --------------------------


def test_shared_prompt_maps_to_every_node_using_it() -> None:
    d = _edit("  Previous verdict:", "  Earlier verdict:")
    assert [c.key for c in d.changes] == [DeclKey("prompt", "review_user")]
    # plan (user:), review (user:) and approve (instructions:) all use review_user
    assert list(d.impacted) == ["approve", "plan", "review"]
    assert d.impacted["review"] == ["uses prompt review_user, which was modified"]


def test_shared_schema_maps_to_every_node_using_it() -> None:
    d = _edit("  summary: string\n", "  summary: string\n  notes: string\n")
    assert [c.key for c in d.changes] == [DeclKey("schema", "verdict")]
    assert d.changes[0].detail == "fields changed: notes"
    assert list(d.impacted) == ["approve", "review", "score"]


def test_unreferenced_prompt_maps_to_no_node() -> None:
    text = FULL.replace("prompt plan_system:", "prompt unused:\n  nobody reads me\n\nprompt plan_system:")
    d = _edit("nobody reads me", "still nobody", text)
    assert [c.key for c in d.changes] == [DeclKey("prompt", "unused")]
    assert d.impacted == {}


MULTI = REPO / "fixtures" / "diff" / "multi"


def _multi_sources() -> dict[str, str]:
    return workflow_digest(MULTI / "main.bot").sources()


def test_included_file_maps_to_every_node_whose_prompt_includes_it() -> None:
    old = _multi_sources()
    # tone.md is included by review_user (fragment) directly, and by ask through rules.md (nested)
    d = diff_units(old, {**old, "prompts/tone.md": "Be blunt.\n"}, old_main="main.bot", new_main="main.bot")
    assert [c.key for c in d.changes] == [DeclKey("include", "prompts/tone.md")]
    assert list(d.impacted) == ["review", "write"]
    d = diff_units(old, {**old, "prompts/rules.md": "No style.\n"}, old_main="main.bot", new_main="main.bot")
    assert [c.key for c in d.changes] == [DeclKey("include", "prompts/rules.md")]
    assert list(d.impacted) == ["write"]
    # dropping the include marker from the fragment's prompt: tone.md is still reached via rules.md
    frag = old["lib/review.bot"].replace('  {{include "../prompts/tone.md"}}\n', "")
    d = diff_units(old, {**old, "lib/review.bot": frag}, old_main="main.bot", new_main="main.bot")
    assert [c.key for c in d.changes] == [DeclKey("prompt", "review_user")]
    assert list(d.impacted) == ["review"]


def test_edit_in_an_imported_fragment_is_seen_like_one_in_the_main() -> None:
    old = _multi_sources()
    new = {**old, "lib/review.bot": old["lib/review.bot"].replace('model: "m"', 'model: "m2"')}
    d = diff_units(old, new, old_main="main.bot", new_main="main.bot")
    assert [(c.key, c.path) for c in d.changes] == [(DeclKey("node", "review"), "lib/review.bot")]
    assert list(d.impacted) == ["review"]


def test_recorded_unit_files_diff_against_disk(tmp_path: Path) -> None:
    for p in MULTI.rglob("*"):
        if p.is_file():
            dest = tmp_path / p.relative_to(MULTI)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(p.read_text())
    recorded = workflow_digest(tmp_path / "main.bot").files
    (tmp_path / "lib" / "review.bot").write_text(
        (tmp_path / "lib" / "review.bot").read_text().replace("  approved: bool\n", "  approved: bool\n  why: string\n"))
    now = workflow_digest(tmp_path / "main.bot").files
    d = diff_units(recorded, now)
    assert [c.key for c in d.changes] == [DeclKey("schema", "verdict")]
    assert list(d.impacted) == ["review"]


def test_bundle_prompt_maps_to_the_nodes_naming_it() -> None:
    main = 'agent a:\n  model: "m"\n  user: greet\n\ntool b:\n  command: "x"\n\nworkflow w:\n  entry: b\n  b -> a\n  a -> done\n'
    old = {"main.bot": main, "prompts/greet.md": "Hello"}
    d = diff_units(old, {**old, "prompts/greet.md": "Hi"})
    assert [c.key for c in d.changes] == [DeclKey("prompt", "greet")]
    assert list(d.impacted) == ["a"]


def test_named_cursor_maps_to_its_users_and_unused_one_to_the_entry() -> None:
    base = ('cursor c1:\n  query: "abc"\n\ncursor c2:\n  query: "x"\n\nagent a:\n  model: "m"\n  tools: [c1]\n\n'
            'tool b:\n  command: "x"\n\nworkflow w:\n  entry: b\n  b -> a\n  a -> done\n')
    d = _edit('query: "abc"', 'query: "abd"', base)
    assert list(d.impacted) == ["a"]
    d = _edit('query: "x"', 'query: "y"', base)
    assert list(d.impacted) == ["b"]


# --- edges -> the node the edge leaves ---------------------------------------------------


@pytest.mark.parametrize(("old", "new"), [
    ("review -> score when approved", 'review -> score when "outputs.review.approved"'),
    ("as fix(3)", "as fix(5)"),
    ('with { feedback: "{{outputs.review.summary}}" }', 'with { feedback: "{{outputs.review}}" }'),
    ("review -> score when approved", "review -> approve when approved"),
])
def test_edge_edit_maps_to_the_node_it_leaves(old: str, new: str) -> None:
    d = _edit(old, new)
    assert [c.key for c in d.changes] == [DeclKey("edges", "review")]
    assert "became" in d.changes[0].detail
    assert list(d.impacted) == ["review"]


def test_expression_condition_respelled_is_no_change_but_edited_is() -> None:
    assert _edit("\"outputs.score.level == 'high'\"", "\"(outputs.score.level)=='high'\"").empty
    d = _edit("\"outputs.score.level == 'high'\"", "\"outputs.score.level != 'low'\"")
    assert list(d.impacted) == ["score"]


def test_reordering_edges_of_one_source_maps_to_it() -> None:
    d = _edit("  split -> edit\n  split -> lint\n", "  split -> lint\n  split -> edit\n")
    assert d.changes[0].detail == "order changed"
    assert list(d.impacted) == ["split"]


def test_added_and_removed_edges() -> None:
    d = _edit("  score -> done\n", "  score -> done\n  score -> lint when \"true\"\n")
    assert d.changes[0].detail == "added `score -> lint when \"true\"`"
    assert list(d.impacted) == ["score"]


# --- workflow scope -> the entry ---------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "key"), [
    ('  target: string = "README.md"', '  target: string = "CHANGES.md"', DeclKey("var", "target")),
    ("  strict: bool = false\n", "", DeclKey("var", "strict")),
    ("    max_cost_usd: 2", "    max_cost_usd: 5", DeclKey("workflow", "budget")),
    ("    max_retries: 1\n", "    max_retries: 0\n", DeclKey("preset", "fast")),
    ("    required: true", "    required: false", DeclKey("attachment", "spec")),
    ("  worktree: none", "  worktree: auto", DeclKey("workflow", "worktree")),
    ("workflow tidy:", "workflow tidier:", DeclKey("workflow", "name")),
    ("  worktree: none\n", '  worktree: none\n  sandbox:\n    image: "alpine"\n', DeclKey("workflow", "sandbox")),
    ("  worktree: none\n", '  worktree: none\n  permission:\n    mode: "ask"\n', DeclKey("workflow", "permission")),
])
def test_workflow_scope_maps_to_the_entry(old: str, new: str, key: DeclKey) -> None:
    d = _edit(old, new)
    assert [c.key for c in d.changes] == [key]
    assert list(d.impacted) == ["plan"]
    assert "workflow scope reaches the entry" in d.impacted["plan"][0]


def test_workflow_vars_block_maps_to_the_entry() -> None:
    d = _edit("  worktree: none\n", "  worktree: none\n  vars:\n    extra: int = 1\n")
    assert [(c.key, c.kind) for c in d.changes] == [(DeclKey("var", "extra"), ChangeKind.ADDED)]
    assert list(d.impacted) == ["plan"]


def test_editing_the_workflow_permission_maps_to_the_entry() -> None:
    before = FULL.replace("  worktree: none\n", '  worktree: none\n  permission:\n    allow: ["read_file"]\n')
    after = before.replace('allow: ["read_file"]', 'allow: ["read_file", "bash"]')
    d = diff_units({"full.bot": before}, {"full.bot": after})
    assert [(c.key, c.kind) for c in d.changes] == [(DeclKey("workflow", "permission"), ChangeKind.MODIFIED)]
    assert list(d.impacted) == ["plan"]


def test_workflow_sandbox_maps_to_the_entry() -> None:
    d = _edit("  worktree: none\n", '  worktree: none\n  sandbox:\n    image: "alpine"\n')
    assert [c.key for c in d.changes] == [DeclKey("workflow", "sandbox")]
    assert list(d.impacted) == ["plan"]


def test_entry_change_maps_to_old_and_new_entry() -> None:
    d = _edit("  entry: plan", "  entry: split")
    assert d.changes[0].detail == "entry plan -> split"
    assert list(d.impacted) == ["plan", "split"]


def test_a_file_that_no_longer_parses_maps_to_the_entry() -> None:
    # a property this version does not know (P007): the skipped block must still count
    text = FULL.replace("  worktree: none\n", '  worktree: none\n  approvals:\n    allow: ["x"]\n')
    d = _edit('allow: ["x"]', 'allow: ["y"]', text)
    assert [c.key.kind for c in d.changes] == ["unparsed"]
    assert list(d.impacted) == ["plan"]


# --- added / removed nodes ---------------------------------------------------------------


def test_added_node_maps_to_the_source_of_the_edge_reaching_it() -> None:
    new = FULL.replace("  edit -> review\n", "  edit -> format\n  format -> review\n") + \
        '\ntool format:\n  command: "fmt"\n'
    d = _diff(FULL, new)
    keys = {(c.key, c.kind) for c in d.changes}
    assert (DeclKey("node", "format"), ChangeKind.ADDED) in keys
    assert (DeclKey("edges", "edit"), ChangeKind.MODIFIED) in keys
    assert (DeclKey("edges", "format"), ChangeKind.ADDED) in keys
    assert list(d.impacted) == ["edit", "format"]
    assert "its edge now reaches the added node format" in d.impacted["edit"]


def test_removed_node_maps_to_its_predecessors() -> None:
    new = FULL.replace("  split -> lint\n", "").replace("  lint -> review\n", "")
    start = new.index("tool lint:")
    end = new.index("compute score:")
    new = new[:start] + new[end:]
    d = _diff(FULL, new)
    node_change = next(c for c in d.changes if c.key == DeclKey("node", "lint"))
    assert node_change.kind is ChangeKind.REMOVED and node_change.detail == "tool lint removed"
    assert list(d.impacted) == ["lint", "split"]  # lint: its own edges went away (it may have run)
    assert "its edge reached the removed node lint" in d.impacted["split"]


def test_to_dict_is_json() -> None:
    d = _edit("as fix(3)", "as fix(4)")
    data = json.loads(json.dumps(d.to_dict()))
    assert data["changes"][0]["kind"] == "edges" and data["changes"][0]["change"] == "modified"
    assert list(data["impacted"]) == ["review"]
    assert "became" in str(d.changes[0])


def test_bundle_sources_mapping_as_recorded_on_a_run(tmp_path: Path) -> None:
    """The rewind records ``path -> text`` (no roles): bundle prompts must still be seen."""
    src = REPO / "fixtures" / "workflows" / "bundle_dir"
    for p in src.rglob("*"):
        if p.is_file():
            dest = tmp_path / p.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(p.read_bytes())
    recorded = workflow_digest(tmp_path / "main.bot", bundle_dir=tmp_path).sources()
    (tmp_path / "prompts" / "task.md").write_text("A different task.\n")
    now = workflow_digest(tmp_path / "main.bot", bundle_dir=tmp_path).sources()
    d = diff_units(recorded, now, old_main="main.bot", new_main="main.bot")
    assert [c.key for c in d.changes] == [DeclKey("prompt", "task")]
    assert list(d.impacted) == ["writer"]
    (tmp_path / "shared" / "style.md").write_text("New style.\n")
    d = diff_units(recorded, workflow_digest(tmp_path / "main.bot", bundle_dir=tmp_path).sources(),
                   old_main="main.bot", new_main="main.bot")
    assert DeclKey("include", "shared/style.md") in [c.key for c in d.changes]
    assert list(d.impacted) == ["writer"]
    (tmp_path / "presets" / "deep.md").write_text((tmp_path / "presets" / "deep.md").read_text() + "\n")
    before = workflow_digest(tmp_path / "main.bot", bundle_dir=tmp_path).sources()
    (tmp_path / "presets" / "deep.md").write_text("---\ndepth: 9\n---\n")
    d = diff_units(before, workflow_digest(tmp_path / "main.bot", bundle_dir=tmp_path).sources(),
                   old_main="main.bot", new_main="main.bot")
    assert [c.key for c in d.changes] == [DeclKey("preset_file", "deep")]
    assert list(d.impacted) == ["writer"]  # workflow scope: the entry
