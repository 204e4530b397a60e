"""`iterion backends`: which LLM backends exist, whether each is usable here, and which one a node
that names none would run on (the resolution order: iterion/backends/choice.py)."""

from __future__ import annotations

import os

import typer

from cli.output import echo, echo_json
from gitrefs.persist.text import one_line
from iterion.backends import get_backend, known_backends
from iterion.backends.choice import ORDER_TEXT, resolve_backend
from iterion.backends.registry import canonical_or_none


def backends_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON: [{name, available, detail, default, chosen_by}]."),
) -> None:
    """List the LLM backends, whether each is configured, and the default here (no call is made).

    --json prints the list, one object per backend: name, available, detail, and default (true on
    the one a node naming none runs on here, which also carries chosen_by: the step of the order).

    Example: iterion backends --json
    """
    default = resolve_backend(os.environ)
    chosen = canonical_or_none(default.name)
    rows: list[dict[str, object]] = []
    for name in known_backends():
        ok, detail = get_backend(name, {}).availability()
        row: dict[str, object] = {"name": name, "available": ok, "detail": detail, "default": name == chosen}
        if name == chosen:
            row["chosen_by"] = default.source
        rows.append(row)
    if as_json:
        # a list, as it always was (scripts iterate it); the default is a flag on its row (none is
        # flagged when the order names a backend that does not exist: the text says which)
        echo_json(rows)
        return
    for r in rows:
        mark = "ok " if r["available"] else "-- "
        echo(f"{mark}{r['name']}: {r['detail']}")
    echo(ORDER_TEXT)
    # the name comes from the environment: one line whatever it holds
    echo(f"default here (a node and workflow naming none, no --backend): {one_line(default.describe())}")


def register(app: typer.Typer) -> None:
    app.command("backends", help="List the LLM backends and whether each is usable.\n\n"
                                 "Also prints the order that picks a node's backend and what it gives here.\n\n"
                                 "Example: iterion backends --json")(backends_cmd)
