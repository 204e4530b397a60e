"""The pygls server: documents in, features out (each feature lives in its own module)."""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from iterion import __version__
from iterion.lsp import completion, diagnostics, formatting, hover, navigation, symbols
from iterion.lsp.analysis import Analysis
from iterion.lsp.positions import lines_of, to_column, word_range


class BotServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("iterion", __version__)
        # document URI -> the URIs its analysis put diagnostics on (cleared once fixed), and
        # the paths of its unit (a change to one of them re-validates it)
        self.published: dict[str, set[str]] = {}
        self.units: dict[str, set[str]] = {}
        # the last analysis per document, valid until any buffer changes (hover, completion and
        # symbols in a row compile once)
        self.cache: dict[str, Analysis] = {}

    def path_of(self, uri: str) -> str:
        return os.path.normpath(os.path.abspath(to_fs_path(uri) or uri))

    def buffers(self) -> dict[str, str]:
        return {self.path_of(uri): doc.source for uri, doc in self.workspace.text_documents.items()}

    def analyse(self, uri: str) -> Analysis:
        if uri not in self.cache:
            doc = self.workspace.get_text_document(uri)
            self.cache[uri] = Analysis(self.path_of(uri), doc.source, self.buffers())
        return self.cache[uri]

    def publish(self, uri: str) -> None:
        """The document's diagnostics on its URI, and those of the files it imports on theirs;
        an open file's URI is its own analysis's (what `validate` says of that file)."""
        a = self.analyse(uri)
        self.units[uri] = set(a.texts)
        others_open = {self.path_of(u) for u in self.workspace.text_documents if u != uri}
        per_uri: dict[str, list[lsp.Diagnostic]] = {}
        for file, diags in diagnostics.by_file(a).items():
            if file == a.path:
                per_uri[uri] = diags
            elif file not in others_open:
                per_uri[navigation.uri_of(file)] = diags
        for stale in self.published.get(uri, set()) - set(per_uri):
            per_uri[stale] = []
        self.send(per_uri)
        self.published[uri] = {u for u, d in per_uri.items() if d}

    def send(self, per_uri: dict[str, list[lsp.Diagnostic]]) -> None:
        for target, diags in per_uri.items():
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=target, diagnostics=diags))

    def republish(self, changed: str) -> None:
        """After ``changed`` was opened, edited, saved or closed: every open document whose unit
        holds it (the document itself included) is validated again."""
        self.cache.clear()
        path = self.path_of(changed)
        for uri in list(self.workspace.text_documents):
            if uri == changed or path in self.units.get(uri, ()):
                self.publish(uri)

    def item_at(self, uri: str, pos: lsp.Position) -> tuple[Analysis, Any, lsp.Range]:
        a = self.analyse(uri)
        lines = lines_of(a.text)
        row, col = to_column(lines, pos)
        item = a.at(a.path, row + 1, col + 1)
        rng = word_range(lines, item.line, item.column) if item is not None else lsp.Range(start=pos, end=pos)
        return a, item, rng


def build() -> BotServer:
    server = BotServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: BotServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.republish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: BotServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.republish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: BotServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.republish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: BotServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.send({u: [] for u in ls.published.pop(uri, set()) | {uri}})  # shown while open only
        ls.units.pop(uri, None)
        ls.republish(uri)  # whoever imports it reads the disk again

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: BotServer, params: lsp.HoverParams) -> lsp.Hover | None:
        a, item, rng = ls.item_at(params.text_document.uri, params.position)
        return hover.hover(a, item, rng)

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: BotServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        a, item, _ = ls.item_at(params.text_document.uri, params.position)
        return navigation.definition(a, item)

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def on_references(ls: BotServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
        a, item, _ = ls.item_at(params.text_document.uri, params.position)
        return navigation.references(a, item, params.context.include_declaration)

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["{", ".", " ", ">"]))
    def on_completion(ls: BotServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        a = ls.analyse(params.text_document.uri)
        lines = lines_of(a.text)
        row, col = to_column(lines, params.position)
        return lsp.CompletionList(is_incomplete=False, items=completion.complete(a, lines, row, col))

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def on_symbols(ls: BotServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        return symbols.document_symbols(ls.analyse(params.text_document.uri))

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def on_format(ls: BotServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit] | None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        try:
            out = formatting.format_text(doc.source, ls.path_of(params.text_document.uri))
        except formatting.Refused as exc:
            ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=str(exc)))
            return None
        if out == doc.source:
            return []
        lines = lines_of(doc.source)
        end = lsp.Position(line=len(lines), character=0)
        return [lsp.TextEdit(range=lsp.Range(start=lsp.Position(line=0, character=0), end=end), new_text=out)]

    return server


def serve() -> None:
    """Speak LSP on stdin/stdout until the client exits."""
    build().start_io()
