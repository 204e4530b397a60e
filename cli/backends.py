"""`iterion backends`: which LLM backends exist and whether each is usable here."""

from __future__ import annotations

import typer

from cli.output import echo, echo_json
from iterion.backends import get_backend, known_backends

CHOICE = ("a node's backend: --backend NAME, else the node's backend:, else the workflow's default_backend:, "
          "else $ITERION_BACKEND, else script when --script or $ITERION_SCRIPT_FILE is given, else openai")


def backends_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """List the LLM backends and whether each is configured (no call is made).

    Example: iterion backends --json
    """
    rows = []
    for name in known_backends():
        ok, detail = get_backend(name, {}).availability()
        rows.append({"name": name, "available": ok, "detail": detail})
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        mark = "ok " if r["available"] else "-- "
        echo(f"{mark}{r['name']}: {r['detail']}")
    echo(CHOICE)


def register(app: typer.Typer) -> None:
    app.command("backends", help="List the LLM backends and whether each is usable.\n\nExample: iterion backends --json")(
        backends_cmd)
