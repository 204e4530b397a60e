"""The subbot node kind in the language: parse, compile, validate, canonical round trip."""

from __future__ import annotations

from pathlib import Path

from iterion.dsl.canonical import canonical_encoding
from iterion.dsl.loader import load_workflow
from iterion.dsl.parser import parse
from iterion.dsl.unparse import unparse
from iterion.ir import NodeKind


def _codes(path: Path) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in load_workflow(path).diagnostics if d.severity.value == "error"]


def test_a_subbot_compiles_with_its_source_and_with_map(project: Path) -> None:
    res = load_workflow(project / "parent.bot")
    assert res.workflow is not None, [d.format() for d in res.diagnostics]
    kid = res.workflow.nodes["kid"]
    assert kid.kind is NodeKind.SUBBOT
    assert kid.source == "bots/child.bot"
    assert kid.source_path == "bots/child.bot"
    assert kid.subbot_with == (("task", "write {{vars.topic}}"),)
    # the child is not part of the parent's unit: editing it leaves the parent's digest alone
    assert all("child.bot" not in f.path for f in res.unit.files)


def test_a_source_in_an_imported_fragment_resolves_relative_to_the_fragment(project: Path) -> None:
    (project / "bots" / "frag.bot").write_text('subbot kid:\n  source: "child.bot"\n  with: { task: "t" }\n')
    (project / "main.bot").write_text('import "bots/frag.bot"\nworkflow w:\n  entry: kid\n  kid -> done\n')
    res = load_workflow(project / "main.bot")
    assert res.workflow is not None, [d.format() for d in res.diagnostics]
    assert res.workflow.nodes["kid"].source_path == "bots/child.bot"


def test_missing_unknown_and_mismatched_sources_are_diagnosed(project: Path) -> None:
    (project / "bad.bot").write_text(
        'subbot a:\n  source: "bots/nochild.bot"\n'
        'subbot b:\n  source: "bots/child.bot"\n  with: { nope: "1" }\n'
        'subbot c:\n  with: { task: "1" }\n'
        'subbot d:\n  source: "child.txt"\n'
        'workflow w:\n  entry: a\n  a -> b\n  b -> c\n  c -> d\n  d -> done\n')
    codes = _codes(project / "bad.bot")
    assert ("C117", "subbot 'a': source bots/nochild.bot not found "
            f"({project / 'bots' / 'nochild.bot'})") in codes
    assert any(c == "C118" and "with.nope is not a var" in m for c, m in codes)
    assert any(c == "C118" and "needs var task" in m for c, m in codes)
    assert any(c == "C116" and "'c' has no source" in m for c, m in codes)
    assert any(c == "C116" and "child.txt" in m for c, m in codes)


def test_an_invalid_child_or_a_cycle_is_refused(project: Path) -> None:
    (project / "bots" / "broken.bot").write_text("workflow w:\n  entry: nowhere\n")
    (project / "loop.bot").write_text('subbot me:\n  source: "loop.bot"\nworkflow w:\n  entry: me\n  me -> done\n')
    (project / "p.bot").write_text('subbot k:\n  source: "bots/broken.bot"\nworkflow w:\n  entry: k\n  k -> done\n')
    assert any(c == "C117" and "does not compile: line 2: C008" in m for c, m in _codes(project / "p.bot"))
    assert any(c == "C117" and "cycle" in m for c, m in _codes(project / "loop.bot"))


def test_an_unknown_property_of_a_subbot_is_p007(project: Path) -> None:
    (project / "x.bot").write_text('subbot k:\n  source: "bots/child.bot"\n  model: "m"\n'
                                   'workflow w:\n  entry: k\n  k -> done\n')
    assert any(c == "P007" for c, _ in _codes(project / "x.bot"))


def test_the_canonical_unparser_round_trips_a_subbot(project: Path) -> None:
    text = (project / "parent.bot").read_text() + 'subbot inline:\n  source: "bots/child.bot"\n' \
        '  with: { task: "t", n: 3 }\n  await: wait_all\n'
    tree, diags = parse(text, "parent.bot")
    assert diags == []
    printed = unparse(tree)
    again, diags = parse(printed, "parent.bot")
    assert diags == []
    assert unparse(again) == printed
    assert canonical_encoding({"x.bot": printed}, main="x.bot") == canonical_encoding({"x.bot": text}, main="x.bot")


def test_the_diagram_draws_a_subbot(project: Path) -> None:
    from iterion.dsl.diagram import to_mermaid

    res = load_workflow(project / "parent.bot")
    assert res.workflow is not None
    assert 'n_kid{{"kid (subbot)"}}' in to_mermaid(res.workflow)
