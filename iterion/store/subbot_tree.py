"""A run's place in its subbot tree: the parent it was launched by, and the children its subbot
nodes launched (``RunDoc.subbot_children``), each with theirs, for ``inspect`` and the web page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iterion.store import RunDoc, Store

_MAX_DEPTH = 8  # a tree deeper than this is cut (a child naming its parent is refused at load anyway)


def parent_of(doc: RunDoc) -> dict[str, Any] | None:
    return {"run": doc.parent_run, "node": doc.parent_node} if doc.parent_run else None


def children_of(store: Store, doc: RunDoc, depth: int = 0) -> list[dict[str, Any]]:
    """``[{node, run, name, status, children}]`` in node order; a child missing from the store
    (recorded, never created: its launch was interrupted) has status None."""
    out: list[dict[str, Any]] = []
    for node, run in sorted(doc.subbot_children.items()):
        entry: dict[str, Any] = {"node": node, "run": run, "name": None, "status": None, "children": []}
        if store.exists(run):
            child = store.load_run(run)
            entry.update(name=child.name, status=child.status.value)
            if depth + 1 < _MAX_DEPTH:
                entry["children"] = children_of(store, child, depth + 1)
        out.append(entry)
    return out


def tree_lines(children: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """``children_of`` drawn one line per child, nested by indentation."""
    lines: list[str] = []
    for c in children:
        lines.append(f"{indent}{c['node']} -> {c['run']} ({c['name'] or '?'}) {c['status'] or 'not created'}")
        lines.extend(tree_lines(c["children"], indent + "  "))
    return lines
