"""`iterion backends`: which LLM backends exist, whether each is usable here, and which one a node
that names none would run on (the resolution order: iterion/backends/choice.py)."""

from __future__ import annotations

import os

import typer

from cli.output import echo, echo_json
from iterion.backends import get_backend, known_backends
from iterion.backends.choice import ORDER_TEXT, resolve_backend

CHOICE = ORDER_TEXT


def backends_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print JSON: {backends: [{name, available, detail}], default: {name, source}, order}."),
) -> None:
    """List the LLM backends, whether each is configured, and the default here (no call is made).

    --json prints {"backends": [{name, available, detail}], "default": {name, source}, "order"}.

    Example: iterion backends --json
    """
    rows = []
    for name in known_backends():
        ok, detail = get_backend(name, {}).availability()
        rows.append({"name": name, "available": ok, "detail": detail})
    default = resolve_backend(os.environ)
    if as_json:
        echo_json({"backends": rows, "default": {"name": default.name, "source": default.source},
                   "order": CHOICE})
        return
    for r in rows:
        mark = "ok " if r["available"] else "-- "
        echo(f"{mark}{r['name']}: {r['detail']}")
    echo(CHOICE)
    echo(f"default here (a node and workflow naming none, no --backend): {default.describe()}")


def register(app: typer.Typer) -> None:
    app.command("backends", help="List the LLM backends and whether each is usable.\n\n"
                                 "Also prints the order that picks a node's backend and what it gives here.\n\n"
                                 "Example: iterion backends --json")(backends_cmd)
