"""The run listing of `iterion inspect`: each id with its shortest unique prefix picked out.

On a terminal (colour on) the prefix is bold and the rest of the id dim, as jj shows change ids;
off a terminal a ``ref`` column carries the prefix as plain text, so a script or a pipe still
sees what to type. Either way the prefix is one `--run-id` accepts (4+ characters, unique).
"""

from __future__ import annotations

import sys
from typing import Any

from cli.output import colour_enabled, echo, styled, table
from iterion.store.refs import short_ids


def add_short_ids(rows: list[dict[str, Any]]) -> None:
    """Give every row ``short_id``: its id's shortest unique prefix among the listed runs."""
    short = short_ids([r["id"] for r in rows])
    for r in rows:
        r["short_id"] = short[r["id"]]


def print_runs(rows: list[dict[str, Any]]) -> None:
    cols = ("id", "name", "status", "workflow", "age")
    if not colour_enabled(sys.stdout):
        for line in table(("ref", *cols), [(r["short_id"], *(r[c] for c in cols)) for r in rows]):
            echo(line)
        return
    lines = table(cols, [tuple(r[c] for c in cols) for r in rows])
    echo(lines[0])
    for line, r in zip(lines[1:], rows):
        rid, short = r["id"], r["short_id"]
        if line.startswith(rid):
            echo(styled(short, "bold"), styled(rid[len(short):], "dim"), line[len(rid):])
        else:
            echo(line)
