"""`iterion lsp`: the `.bot` language server on stdin/stdout (pygls imported only here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer


def register(app: typer.Typer) -> None:
    def lsp() -> None:
        """Run the .bot language server on stdin/stdout (for editors: diagnostics, hover, navigation).

        Editors start it themselves; see docs/editors.md for VS Code, Neovim and Helix.

        Example: iterion lsp
        """
        from iterion.lsp.server import serve

        serve()

    app.command("lsp")(lsp)
