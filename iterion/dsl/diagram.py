"""Mermaid rendering of a compiled workflow (``iterion diagram``)."""

from __future__ import annotations

import json

from iterion.ir import DONE, FAIL, Edge, Node, NodeKind, Workflow

# Mermaid shapes per kind: (open, close). Ids are prefixed because Mermaid reserves words like `end`.
_SHAPES: dict[NodeKind, tuple[str, str]] = {
    NodeKind.AGENT: ("(", ")"),
    NodeKind.JUDGE: ("(", ")"),
    NodeKind.ROUTER: ("{", "}"),
    NodeKind.HUMAN: ("[/", "/]"),
    NodeKind.TOOL: ("[", "]"),
    NodeKind.COMPUTE: ("[[", "]]"),
    NodeKind.FAIL: ("((", "))"),
    NodeKind.SUBBOT: ("{{", "}}"),  # a hexagon: a whole workflow behind one node
}


def _id(name: str) -> str:
    if name in (DONE, FAIL):
        return {DONE: "t_done", FAIL: "t_fail"}[name]
    if name.isascii():
        return f"n_{name}"
    # Mermaid ids are ASCII words: a Unicode node name (docs/language.md 1) is spelled by code point,
    # `_` doubled so no two names meet
    return "u_" + "".join("__" if c == "_" else c if c.isascii() else f"_{ord(c):x}_" for c in name)


def _label(text: str) -> str:
    return '"' + text.replace('"', "#quot;").replace("\n", " ") + '"'


def _node_label(node: Node) -> str:
    kind = node.kind.value
    if node.kind is NodeKind.ROUTER and node.mode:
        kind = f"router: {node.mode.value}"
    if node.kind is NodeKind.FAIL and node.code:
        kind = f"fail: {node.code}"
    if node.await_mode:
        kind += f", await {node.await_mode.value}"
    return f"{node.id} ({kind})"


def _edge_label(e: Edge) -> str:
    parts = []
    if e.condition is not None:
        parts.append(str(e.condition))
    if e.loop:
        parts.append(f"as {e.loop}({e.loop_max if e.loop_bound is None else json.dumps(e.loop_bound)})")
    if e.with_map:
        parts.append("with " + ", ".join(k for k, _ in e.with_map))
    return " ".join(parts)


def to_mermaid(wf: Workflow) -> str:
    lines = ["flowchart TD", f"  %% workflow {wf.name}, entry {wf.entry}"]
    for node in wf.nodes.values():
        o, c = _SHAPES[node.kind]
        lines.append(f"  {_id(node.id)}{o}{_label(_node_label(node))}{c}")
    used = {e.dst for e in wf.edges}
    if DONE in used:
        lines.append(f"  {_id(DONE)}(((done)))")
    if FAIL in used:
        lines.append(f"  {_id(FAIL)}(((fail)))")
    lines.append(f"  start((start)) --> {_id(wf.entry)}")
    for e in wf.edges:
        label = _edge_label(e)
        arrow = "-.->" if e.loop else "-->"
        if label:
            arrow = f'-. {_label(label)} .->' if e.loop else f"-- {_label(label)} -->"
        lines.append(f"  {_id(e.src)} {arrow} {_id(e.dst)}")
    for region in wf.fan_out_regions.values():
        if region.join:
            lines.append(f"  %% fan-out {region.router} joins at {region.join}")
    return "\n".join(lines) + "\n"
