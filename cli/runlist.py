"""The run listing of `iterion inspect`: each id with its shortest unique prefix picked out.

On a terminal (colour on) the prefix is bold and the rest of the id dim, as jj shows change ids;
off a terminal a ``ref`` column carries the prefix as plain text, so a script or a pipe still
sees what to type. Either way the prefix is one `--run-id` accepts (4+ characters, unique).
On a narrow terminal the id is what is cut (never its prefix), so the name stays readable.
"""

from __future__ import annotations

import sys
from typing import Any

from cli.output import colour_enabled, echo, fit, output_width, styled, table
from iterion.store.refs import short_ids


def add_short_ids(rows: list[dict[str, Any]]) -> None:
    """Give every row ``short_id``: its id's shortest unique prefix among the listed runs."""
    short = short_ids([r["id"] for r in rows])
    for r in rows:
        r["short_id"] = short[r["id"]]


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    status = f"{r['status']}{' (rewind interrupted)' if r.get('rewind_interrupted') else ''}"
    return (r["id"], r["name"], status, r["workflow"], r["age"])


def _narrow(rows: list[dict[str, Any]], cells: list[list[str]], headers: tuple[str, ...], width: int | None) -> None:
    """Narrow (in place) the id column, then the workflow column, by what a line is too long: the
    id down to the longest short prefix plus its ``…`` (the prefix is what a person types), the
    workflow down to its header (a run's name begins with it). The name is cut last, by table()."""
    if width is None or not cells:
        return
    idc, wfc = headers.index("id"), headers.index("workflow")
    floors = {idc: max(len("id"), *(len(r["short_id"]) + 1 for r in rows)), wfc: len("workflow")}
    for col in (idc, wfc):
        # (len: ids, generated names, statuses and workflow identifiers are ASCII; table()
        # measures the cells again, wide characters included, and narrows the rest if needed)
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        excess = sum(widths) + 2 * (len(widths) - 1) - width
        if excess <= 0:
            return
        room = max(floors[col], widths[col] - excess)
        for c in cells:
            c[col] = fit(c[col], room)


def print_runs(rows: list[dict[str, Any]]) -> None:
    """The listing, fitted to the terminal: the id is cut first (never its short unique prefix,
    bold on a terminal, the ``ref`` column off one), then the workflow, the name last."""
    cols = ("id", "name", "status", "workflow", "age")
    width = output_width()
    if not colour_enabled(sys.stdout):
        plain = [[r["short_id"], *_cells(r)] for r in rows]
        _narrow(rows, plain, ("ref", *cols), width)
        for line in table(("ref", *cols), plain, width=width, keep=(0, 1)):
            echo(line)
        return
    coloured = [list(_cells(r)) for r in rows]
    _narrow(rows, coloured, cols, width)
    lines = table(cols, coloured, width=width, keep=(0,))
    echo(lines[0])
    for line, r, cell in zip(lines[1:], rows, coloured):
        rid, short = cell[0], r["short_id"]
        if line.startswith(rid) and rid.startswith(short):
            echo(styled(short, "bold"), styled(rid[len(short):], "dim"), line[len(rid):])
        else:
            echo(line)
