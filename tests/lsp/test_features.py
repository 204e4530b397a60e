"""Hover, definition, references, completion, symbols and formatting of `iterion lsp`, asked
over stdio by a real LSP client on fixture workflows."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types as lsp

from tests.conftest import REPO_ROOT
from tests.lsp.client import Session, at, run_session

FIXTURE = REPO_ROOT / "fixtures" / "workflows" / "review_loop.bot"


def _doc(uri: str) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri=uri)


def test_hover_definition_references_on_a_fixture() -> None:
    text = FIXTURE.read_text()

    async def body(s: Session) -> dict[str, object]:
        uri = await s.open(FIXTURE)
        c = s.client
        hov = {}
        for name, pos in {"node": at(text, "critic", 1), "schema": at(text, "output: draft", 0, 8),
                          "prompt": at(text, "system: writer_system", 0, 8), "var": at(text, "{{vars.topic}}", 0, 7),
                          "outputs": at(text, "{{outputs.write.text", 0, 10),
                          "field": at(text, "{{outputs.write.text", 0, 17)}.items():
            h = await c.text_document_hover_async(lsp.HoverParams(text_document=_doc(uri), position=pos))
            hov[name] = h.contents.value if h else None
        definition = await c.text_document_definition_async(
            lsp.DefinitionParams(text_document=_doc(uri), position=at(text, "{{outputs.write.text", 0, 10)))
        refs = await c.text_document_references_async(lsp.ReferenceParams(
            text_document=_doc(uri), position=at(text, "agent write", 0, 6),
            context=lsp.ReferenceContext(include_declaration=True)))
        field_def = await c.text_document_definition_async(
            lsp.DefinitionParams(text_document=_doc(uri), position=at(text, "{{outputs.write.word_count", 0, 17)))
        field_refs = await c.text_document_references_async(lsp.ReferenceParams(
            text_document=_doc(uri), position=at(text, "  text: string", 0, 2),
            context=lsp.ReferenceContext(include_declaration=False)))
        return {"hover": hov, "definition": definition, "refs": refs, "field_def": field_def, "field_refs": field_refs}

    out = run_session(body, REPO_ROOT)
    hov = out["hover"]
    assert isinstance(hov, dict)
    assert "**judge** `critic`" in hov["node"] and "output: judgement" in hov["node"]
    assert "text: string" in hov["schema"] and "word_count: int" in hov["schema"]
    assert "You write {{vars.topic}}" in hov["prompt"]
    assert "`string`" in hov["var"] and '"release notes"' in hov["var"]
    assert "**agent** `write`" in hov["outputs"]
    assert "**field** `draft.text`: `string`" in hov["field"]
    field_def = out["field_def"]  # outputs.write.word_count -> the field of write's output schema
    assert isinstance(field_def, lsp.Location) and field_def.range.start == at(text, "word_count: int")
    field_refs = out["field_refs"]
    assert isinstance(field_refs, (list, tuple))
    assert [r.range.start for r in field_refs] == [at(text, "{{outputs.write.text", 0, 16)]
    definition = out["definition"]
    assert isinstance(definition, lsp.Location) and definition.uri == FIXTURE.resolve().as_uri()
    assert definition.range.start == at(text, "agent write", 0, 6)
    refs = out["refs"]
    assert isinstance(refs, (list, tuple))
    lines = sorted(r.range.start.line + 1 for r in refs)
    # the declaration, {{outputs.write.*}} x3, entry, two edges
    want = sorted({text[: text.index(n)].count("\n") + 1 for n in ("agent write", "entry: write", "write -> critic",
                                                                    "critic -> write")} |
                  {i + 1 for i, line in enumerate(text.splitlines()) if "outputs.write." in line})
    assert sorted(set(lines)) == want and len(refs) >= 7


def test_definition_crosses_imports() -> None:
    main = REPO_ROOT / "fixtures" / "workflows" / "imports" / "main.bot"
    text = main.read_text()

    async def body(s: Session) -> tuple[object, object, object, object]:
        uri = await s.open(main)
        node = await s.client.text_document_definition_async(
            lsp.DefinitionParams(text_document=_doc(uri), position=at(text, "entry: analyse", 0, 8)))
        imp = await s.client.text_document_definition_async(
            lsp.DefinitionParams(text_document=_doc(uri), position=at(text, "lib/nodes.bot", 0, 2)))
        inc = REPO_ROOT / "fixtures" / "workflows" / "includes.bot"
        inc_uri = await s.open(inc)
        include = await s.client.text_document_definition_async(lsp.DefinitionParams(
            text_document=_doc(inc_uri), position=at(inc.read_text(), "includes/prompts/base.md", 0, 3)))
        refs = await s.client.text_document_references_async(lsp.ReferenceParams(
            text_document=_doc(uri), position=at(text, "entry: analyse", 0, 8),
            context=lsp.ReferenceContext(include_declaration=False)))
        return node, imp, include, refs

    node, imp, include, refs = run_session(body, REPO_ROOT)
    base = REPO_ROOT / "fixtures" / "workflows" / "includes" / "prompts" / "base.md"
    assert isinstance(include, lsp.Location) and include.uri == base.resolve().as_uri()
    # the edges here and {{outputs.analyse.*}} in the imported nodes.bot
    assert {r.uri.rsplit("/", 1)[1] for r in refs} == {"main.bot", "nodes.bot"}
    assert isinstance(node, lsp.Location) and node.uri.endswith("/imports/lib/nodes.bot")
    assert isinstance(imp, lsp.Location) and imp.uri == (main.parent / "lib" / "nodes.bot").resolve().as_uri()


def test_completion_symbols() -> None:
    text = FIXTURE.read_text()
    edited = text.replace("  write -> critic\n", "  write -> \n").replace(
        "  reasoning_effort: high\n", "  reasoning_effort: high\n  \n")

    async def labels(s: Session, uri: str, pos: lsp.Position) -> set[str]:
        res = await s.client.text_document_completion_async(lsp.CompletionParams(text_document=_doc(uri), position=pos))
        items = res.items if isinstance(res, lsp.CompletionList) else (res or [])
        return {i.label for i in items}

    async def body(s: Session) -> dict[str, object]:
        uri = await s.open(FIXTURE)
        await s.change(uri, edited)
        out: dict[str, object] = {
            "edge": await labels(s, uri, at(edited, "write -> \n", 0, 9)),
            "props": await labels(s, uri, at(edited, "reasoning_effort: high\n  \n", 0, 25)),
            "template": await labels(s, uri, at(edited, "{{outputs.write.text", 0, 2)),
            "outputs": await labels(s, uri, at(edited, "{{outputs.write.text", 0, 10)),
            "fields": await labels(s, uri, at(edited, "{{outputs.write.text", 0, 16)),
            "prompt": await labels(s, uri, at(edited, "system: writer_system", 0, 8)),
        }
        out["symbols"] = await s.client.text_document_document_symbol_async(lsp.DocumentSymbolParams(text_document=_doc(uri)))
        return out

    out = run_session(body, REPO_ROOT)
    assert out["edge"] >= {"write", "critic", "done", "fail"}
    assert {"model", "output", "session", "tools"} <= out["props"] and "mode" not in out["props"]  # judge's, not router's
    assert {"outputs.", "vars.", "loop."} <= out["template"]
    assert out["outputs"] >= {"write", "critic"}
    assert out["fields"] == {"text", "word_count"}
    assert out["prompt"] >= {"writer_system", "writer_user", "judge_user"}
    symbols = out["symbols"]
    assert isinstance(symbols, (list, tuple))
    names = {(sym.name, sym.kind) for sym in symbols}
    assert {("write", lsp.SymbolKind.Function), ("critic", lsp.SymbolKind.Function), ("draft", lsp.SymbolKind.Struct),
            ("writer_system", lsp.SymbolKind.String), ("topic", lsp.SymbolKind.Variable),
            ("polish_notes", lsp.SymbolKind.Module)} <= names
    wf = next(sym for sym in symbols if sym.name == "polish_notes")
    assert [c.name for c in wf.children or []] == ["audience"]
    draft = next(sym for sym in symbols if sym.name == "draft")
    assert [c.name for c in draft.children or []] == ["text", "word_count"]


def _apply(text: str, edits: list[lsp.TextEdit] | None) -> str:
    if not edits:
        return text
    (edit,) = edits
    assert edit.range.start == lsp.Position(line=0, character=0)
    return edit.new_text


def test_formatting_is_idempotent_and_refused_where_it_cannot_round_trip(tmp_path: Path) -> None:
    messy = tmp_path / "messy.bot"
    messy.write_text('schema s:\n    x:   string\nagent a:\n    model:   "m"\n    output: s\n\n\n'
                     "workflow w:\n    entry: a\n    a   ->  done\n")
    commented = tmp_path / "commented.bot"
    shutil.copy(FIXTURE, commented)  # has `##` comments the unparser would drop

    async def fmt(s: Session, uri: str) -> list[lsp.TextEdit] | None:
        return await s.client.text_document_formatting_async(lsp.DocumentFormattingParams(
            text_document=_doc(uri), options=lsp.FormattingOptions(tab_size=2, insert_spaces=True)))

    async def body(s: Session) -> tuple[str, str, object, list[str], list[lsp.Diagnostic]]:
        uri = await s.open(messy)
        once = _apply(messy.read_text(), await fmt(s, uri))
        await s.change(uri, once)
        twice = _apply(once, await fmt(s, uri))
        diags = s.diagnostics[uri]
        curi = await s.open(commented)
        refused = await fmt(s, curi)
        return once, twice, refused, list(s.messages), diags

    once, twice, refused, messages, diags = run_session(body, tmp_path)
    assert once != messy.read_text() and once == twice
    assert "  a -> done" in once and '  model: "m"' in once
    assert diags == []  # the formatted text is still a valid workflow
    assert refused is None
    assert any("comment" in m and "not formatted" in m for m in messages), messages
    assert commented.read_text() == FIXTURE.read_text()
