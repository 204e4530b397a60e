"""The run listing of `iterion inspect`: each id with its shortest unique prefix picked out.

On a terminal (colour on) the prefix is bold and the rest of the id dim, as jj shows change ids;
off a terminal a ``ref`` column carries the prefix as plain text, so a script or a pipe still
sees what to type. Either way the prefix is one `--run-id` accepts (4+ characters, unique).
"""

from __future__ import annotations

import sys
from typing import Any

from cli.output import colour_enabled, echo, output_width, styled, table
from iterion.store.refs import short_ids


def add_short_ids(rows: list[dict[str, Any]]) -> None:
    """Give every row ``short_id``: its id's shortest unique prefix among the listed runs."""
    short = short_ids([r["id"] for r in rows])
    for r in rows:
        r["short_id"] = short[r["id"]]


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    status = f"{r['status']}{' (rewind interrupted)' if r.get('rewind_interrupted') else ''}"
    return (r["id"], r["name"], status, r["workflow"], r["age"])


def print_runs(rows: list[dict[str, Any]]) -> None:
    """The listing, fitted to the terminal (ids and refs are never cut: they are what you copy)."""
    cols = ("id", "name", "status", "workflow", "age")
    width = output_width()
    if not colour_enabled(sys.stdout):
        for line in table(("ref", *cols), [(r["short_id"], *_cells(r)) for r in rows], width=width, keep=(0, 1)):
            echo(line)
        return
    lines = table(cols, [_cells(r) for r in rows], width=width, keep=(0,))
    echo(lines[0])
    for line, r in zip(lines[1:], rows):
        rid, short = r["id"], r["short_id"]
        if line.startswith(rid):
            echo(styled(short, "bold"), styled(rid[len(short):], "dim"), line[len(rid):])
        else:
            echo(line)
