"""Loading a unit from sources held in memory (a run's recorded files): the same resolution of
imports, includes and bundles as on disk, and what the canonical encoding builds on."""

from __future__ import annotations

from pathlib import Path

from iterion.dsl import UnitRole, load_tree, load_workflow
from iterion.dsl.canonical import DeclKey, canonical_encoding, load_unit
from iterion.dsl.digest import workflow_digest

WORKFLOWS = Path(__file__).resolve().parents[2] / "fixtures" / "workflows"

MAIN = """\
import "lib/nodes.bot"

prompt ask:
  {{include "../shared/rules.md"}}

workflow w:
  entry: review
  review -> done
"""

NODES = """\
agent review:
  model: "m"
  system: ask
  user: "go"
"""


def test_recorded_sources_compile_like_the_files_on_disk() -> None:
    for main in (WORKFLOWS / "includes.bot", WORKFLOWS / "imports" / "main.bot"):
        on_disk = load_workflow(main, env={})
        recorded = workflow_digest(main).sources()
        in_memory = load_tree(recorded, main.name, env={})
        assert on_disk.ok and in_memory.ok
        assert in_memory.workflow.nodes.keys() == on_disk.workflow.nodes.keys()
        assert in_memory.workflow.prompts == on_disk.workflow.prompts
        assert sorted(f.path for f in in_memory.unit.files) == sorted(recorded)


def test_imports_and_includes_resolve_relative_to_their_file_with_parent_paths() -> None:
    result = load_tree({"main.bot": MAIN, "lib/nodes.bot": NODES, "../shared/rules.md": "Be brief.\n"},
                       "main.bot")
    assert result.ok, result.diagnostics
    assert result.workflow.prompts["ask"] == "Be brief.\n"
    assert [(f.path, f.role) for f in result.unit.files] == [
        ("main.bot", UnitRole.MAIN), ("lib/nodes.bot", UnitRole.FRAGMENT), ("../shared/rules.md", UnitRole.INCLUDE)]
    assert [t.path for t in result.unit.asts] == ["main.bot", "lib/nodes.bot"]


def test_missing_files_are_reported_not_raised() -> None:
    missing_import = load_tree({"main.bot": MAIN, "../shared/rules.md": "x"}, "main.bot")
    assert not missing_import.ok
    assert [d.code for d in missing_import.diagnostics if d.code.startswith("L")] == ["L001"]
    missing_include = load_tree({"main.bot": MAIN, "lib/nodes.bot": NODES}, "main.bot")
    assert [d.code for d in missing_include.diagnostics] == ["L003"]
    missing_main = load_tree({}, "main.bot")
    assert [d.code for d in missing_main.diagnostics] == ["L001"]


def test_parse_errors_name_the_unparsed_file() -> None:
    result = load_tree({"main.bot": MAIN, "lib/nodes.bot": "agent review:\n  bogus_prop: 1\n",
                        "../shared/rules.md": ""}, "main.bot")
    assert result.unit.unparsed == ["lib/nodes.bot"]
    assert any(d.code == "P007" for d in result.diagnostics)


def test_a_recorded_bundle_loads_its_prompts_and_presets() -> None:
    bundle = WORKFLOWS / "bundle_dir"
    files = {p.relative_to(bundle).as_posix(): p.read_text() for p in bundle.rglob("*") if p.is_file()}
    on_disk = load_workflow(bundle, env={})
    in_memory = load_tree(files, "main.bot", bundle_root=".", env={})
    assert on_disk.ok and in_memory.ok, in_memory.diagnostics
    assert in_memory.workflow.prompts == on_disk.workflow.prompts
    roles = {f.path: f.role for f in in_memory.unit.files}
    assert roles["prompts/task.md"] is UnitRole.BUNDLE_PROMPT and roles["manifest.yaml"] is UnitRole.MANIFEST
    # without bundle_root the same files are plain sources: the bundle prompt is unknown
    assert not load_tree(files, "main.bot", env={}).ok


def test_canonical_unit_reads_the_loaders_trees() -> None:
    """One import resolution: the canonical unit holds exactly the files the loader reached."""
    sources = {"main.bot": MAIN, "./lib/nodes.bot": NODES, "lib/unused.bot": "agent x:\n  model: \"m\"\n",
               "../shared/rules.md": "r"}
    unit = load_unit(sources, main="main.bot")
    assert list(unit.trees) == [t.path for t in load_tree(sources, "main.bot").unit.asts] == ["main.bot", "lib/nodes.bot"]
    assert DeclKey("node", "review") in unit.decls and DeclKey("node", "x") not in unit.decls
    # a cycle is loaded once per file, as the loader does
    cyc = {"a.bot": 'import "b.bot"\n' + MAIN.replace('import "lib/nodes.bot"\n', ""), "b.bot": 'import "a.bot"\n' + NODES,
           "../shared/rules.md": "r"}
    assert set(load_unit(cyc, main="a.bot").trees) == {"a.bot", "b.bot"}
    assert canonical_encoding(cyc, main="a.bot") == canonical_encoding(
        {"a.bot": cyc["a.bot"].replace('import "b.bot"\n', "") + NODES, "../shared/rules.md": "r"}, main="a.bot")


def test_parse_only_stops_before_compiling() -> None:
    sources = {"main.bot": MAIN, "lib/nodes.bot": NODES, "../shared/rules.md": "r"}
    result = load_tree(sources, "main.bot", parse_only=True)
    assert result.workflow is None and result.diagnostics == []
    assert [t.path for t in result.unit.asts] == ["main.bot", "lib/nodes.bot"]
    assert UnitRole.INCLUDE not in {f.role for f in result.unit.files}  # includes are read by the compiler
