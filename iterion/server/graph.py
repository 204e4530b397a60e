"""The workflow graph as an SVG drawn on the server (no script, no CDN: the page works offline).

Layout: each node's layer is its longest distance from the entry over the edges that do not
close a loop (a loop's back edge would make the graph cyclic); nodes of a layer sit side by
side in declaration order. Each node is coloured by the status of its latest execution in the
run's timeline (``timeline.executions``); a node never executed is grey. Back edges are drawn
dashed. Every name goes through ``esc``: run data is never markup.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from iterion.ir import DONE, FAIL, Workflow

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 150, 36, 24, 46, 12
COLOURS = {"finished": "#c9f0d3", "failed": "#f7cccc", "running": "#cde3fb", "paused": "#fbecc0",
           "interrupted": "#e6d9f5", "pending": "#eef0f3"}
TERMINALS = (DONE, FAIL)  # the built-in ends, drawn dark


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def node_statuses(executions: list[dict[str, Any]]) -> dict[str, str]:
    """node -> the status of its latest execution (rows are in start order)."""
    out: dict[str, str] = {}
    for row in executions:
        if row.get("node"):
            out[str(row["node"])] = str(row.get("status") or "pending")
    return out


def layers(wf: Workflow) -> dict[str, int]:
    """node -> layer (longest forward distance from the entry); terminals one past the deepest."""
    forward: dict[str, list[str]] = {n: [] for n in wf.nodes}
    for e in wf.edges:
        if e.loop is None and e.src in forward and e.dst in wf.nodes:
            forward[e.src].append(e.dst)
    depth = {n: 0 for n in wf.nodes}
    # longest path by relaxation, bounded by the node count (the forward graph is acyclic;
    # the bound keeps a malformed one from looping)
    for _ in range(len(wf.nodes)):
        moved = False
        for src, dsts in forward.items():
            for dst in dsts:
                if depth[dst] < depth[src] + 1 and depth[src] + 1 < len(wf.nodes):
                    depth[dst] = depth[src] + 1
                    moved = True
        if not moved:
            break
    last = max(depth.values(), default=0) + 1
    for t in TERMINALS:
        if any(e.dst == t for e in wf.edges):
            depth[t] = last
    return depth


def workflow_svg(wf: Workflow, statuses: dict[str, str], children: dict[str, dict[str, Any]] | None = None) -> str:
    """``children``: subbot node -> its child run (``subbot_tree.children_of`` entries): a subbot
    node is drawn with a double border and, once it launched its child, links to the child's page."""
    depth = layers(wf)
    rows: dict[int, list[str]] = {}
    for name in [*wf.nodes, *TERMINALS]:
        if name in depth:
            rows.setdefault(depth[name], []).append(name)
    widest = max((len(r) for r in rows.values()), default=1)
    width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X
    height = PAD * 2 + len(rows) * NODE_H + max(len(rows) - 1, 0) * GAP_Y
    pos: dict[str, tuple[float, float]] = {}
    for layer, names in rows.items():
        span = len(names) * NODE_W + (len(names) - 1) * GAP_X
        x0 = (width - span) / 2
        for i, name in enumerate(names):
            pos[name] = (x0 + i * (NODE_W + GAP_X), PAD + layer * (NODE_H + GAP_Y))
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' id=graph-svg viewBox='0 0 {width} {height}' "
             f"width='{width}' role=img aria-labelledby=graph-title style='max-width:100%;height:auto'>"
             f"<title id=graph-title>workflow {esc(wf.name)}: nodes coloured by status</title>"
             "<defs><marker id=arrow viewBox='0 0 10 10' refX=10 refY=5 markerWidth=7 markerHeight=7 "
             "orient=auto-start-reverse><path d='M0,0L10,5L0,10z' fill='#68717d'/></marker></defs>"]
    for e in wf.edges:
        if e.src not in pos or e.dst not in pos:
            continue
        (sx, sy), (dx, dy) = pos[e.src], pos[e.dst]
        x1, y1 = sx + NODE_W / 2, sy + NODE_H
        x2, y2 = dx + NODE_W / 2, dy
        dash = ""
        if dy <= sy:  # a back edge (a loop): from the source's side up to the target's side
            x1, y1, x2, y2 = sx + NODE_W, sy + NODE_H / 2, dx + NODE_W, dy + NODE_H / 2
            dash = " stroke-dasharray='4 3'"
            bend = max(x1, x2) + 30
            d = f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2},{y2}"
        else:
            d = f"M{x1},{y1} L{x2},{y2}"
        parts.append(f"<path class=edge d='{d}' fill=none stroke='#68717d'{dash} marker-end='url(#arrow)'/>")
    for name, (x, y) in pos.items():
        terminal = name in TERMINALS
        status = "terminal" if terminal else statuses.get(name, "pending")
        fill = "#1d232a" if terminal else COLOURS.get(status, COLOURS["pending"])
        kind = "" if terminal else wf.nodes[name].kind.value
        text_fill = "#fff" if terminal else "#1d232a"
        label = name if len(name) <= 18 else name[:17] + "…"
        child = (children or {}).get(name)
        subbot = kind == "subbot"
        what = f"{name} ({kind or 'end'}): {status}"
        if child:
            what += f"; child run {child.get('run')} ({child.get('name') or '?'}, {child.get('status') or 'not created'})"
        inner = "" if not subbot else (f"<rect x='{x + 3}' y='{y + 3}' width='{NODE_W - 6}' height='{NODE_H - 6}' rx=6 "
                                      "fill=none stroke='#68717d'/>")
        node = (f"<g class='gnode{' subbot' if subbot else ''}' data-node='{esc(name)}' data-status='{esc(status)}'"
                f"{' data-child=' + chr(39) + esc(child.get('run')) + chr(39) if child else ''}>"
                f"<title>{esc(what)}</title>"
                f"<rect x='{x}' y='{y}' width='{NODE_W}' height='{NODE_H}' rx=8 fill='{fill}' stroke='#68717d'/>{inner}"
                f"<text x='{x + NODE_W / 2}' y='{y + (23 if terminal else 15)}' text-anchor=middle font-size=12 fill='{text_fill}' "
                f"font-weight=600>{esc(label)}</text>"
                f"<text x='{x + NODE_W / 2}' y='{y + 29}' text-anchor=middle font-size=10 fill='{text_fill}'>"
                f"{esc(kind + ' · ' + status if kind else '')}{' ↗' if child else ''}</text></g>")
        if child and child.get("run"):  # a link (focusable by keyboard) to the run this node launched
            href = "/runs/" + quote(str(child["run"]), safe="")
            node = f"<a class=child-link href='{esc(href)}' aria-label='{esc(what)}'>{node}</a>"
        parts.append(node)
    parts.append("</svg>")
    return "".join(parts)
