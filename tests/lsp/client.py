"""A real LSP client (pygls's) speaking to `iterion lsp` started as a subprocess over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

T = TypeVar("T")


class Session:
    """One `iterion lsp` process: the diagnostics it published (by URI) and its window messages."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.diagnostics: dict[str, list[lsp.Diagnostic]] = {}
        self.messages: list[str] = []
        self.versions: dict[str, int] = {}

    async def open(self, path: Path, text: str | None = None) -> str:
        uri = path.resolve().as_uri()
        if text is None:
            text = path.read_bytes().decode("utf-8", "replace")
        self.versions[uri] = 1
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="bot", version=1, text=text)))
        await self.barrier(uri)
        return uri

    async def change(self, uri: str, text: str) -> None:
        self.versions[uri] += 1
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)]))
        await self.barrier(uri)

    async def close(self, uri: str) -> None:
        self.client.text_document_did_close(lsp.DidCloseTextDocumentParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri)))

    async def barrier(self, uri: str) -> None:
        """A request answered after every earlier notification was handled (the server is ordered)."""
        await self.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))


def run_session(body: Callable[[Session], Awaitable[T]], cwd: Path) -> T:
    async def main() -> T:
        client = LanguageClient("iterion-tests", "1")
        session = Session(client)

        @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diags(params: lsp.PublishDiagnosticsParams) -> None:
            session.diagnostics[params.uri] = list(params.diagnostics)

        @client.feature(lsp.WINDOW_SHOW_MESSAGE)
        def message(params: lsp.ShowMessageParams) -> None:
            session.messages.append(params.message)

        await client.start_io(sys.executable, "-m", "cli.main", "lsp", cwd=str(cwd), env={**os.environ})
        try:
            await client.initialize_async(lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(), root_uri=cwd.resolve().as_uri()))
            client.initialized(lsp.InitializedParams())
            return await body(session)
        finally:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()

    return asyncio.run(main())


def at(text: str, needle: str, nth: int = 0, offset: int = 0) -> lsp.Position:
    """The position of the ``nth`` occurrence of ``needle`` in ``text`` (+``offset`` characters)."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(needle, i + 1)
    i += offset
    line = text.count("\n", 0, i)
    return lsp.Position(line=line, character=i - (text.rfind("\n", 0, i) + 1))


