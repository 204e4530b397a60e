"""The declaration diff `rewind --auto` reads: which nodes an edit of a unit affects.

Both versions are compared declaration by declaration on their canonical encodings
(``iterion.dsl.canonical``), so comments, blank lines and line shifts are no change. Each
changed declaration is then mapped to the nodes it affects, resolving indirection
(docs/user-guide.md, "Rewind": ``--auto`` rewinds to the node you edited):

- a node's own property            -> that node (a named fail node: also the nodes leading to it)
- a shared prompt / schema          -> every node referencing it (in either version)
- an included file                  -> every node whose prompts or strings include it, nested too
- a named cursor / mcp_server       -> every node referencing it (the entry if none does)
- the edges leaving a node          -> that node (it re-selects its successor)
- vars, presets, attachments, entry, budget, sandbox, permission and every other
  workflow-scope setting            -> the entry node (of both versions when it moved)
- an added node                     -> the sources of the edges that now reach it
- a removed node                    -> the sources of the edges that reached it

It errs toward more nodes: references are collected from both versions, and every identifier
or string in a node that names a declaration counts as a reference. The rewind picks the
earliest EXECUTED node among ``impacted`` itself.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from iterion.dsl import ast
from iterion.dsl.canonical import (
    DeclKey,
    Sources,
    UnitAst,
    declaration_strings,
    encode_decl,
    encode_tree,
    load_unit,
    names_in,
)
from iterion.ir import TERMINALS

_REFERENCED_KINDS = ("prompt", "schema")


class ChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    MODIFIED = "modified"


@dataclass(frozen=True)
class DeclChange:
    key: DeclKey
    kind: ChangeKind
    detail: str
    path: str  # the file that declares it (new version, or old for a removal)

    def __str__(self) -> str:
        return f"{self.key} {self.kind.value}: {self.detail}"


@dataclass
class UnitDiff:
    changes: list[DeclChange] = field(default_factory=list)
    impacted: dict[str, list[str]] = field(default_factory=dict)  # node id -> reasons

    @property
    def empty(self) -> bool:
        return not self.changes

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": [{"kind": c.key.kind, "name": c.key.name, "change": c.kind.value,
                         "detail": c.detail, "path": c.path} for c in self.changes],
            "impacted": {n: list(r) for n, r in self.impacted.items()},
        }


# --- graph and reference helpers ---------------------------------------------------------


def edge_text(edge: ast.EdgeDecl) -> str:
    """An edge as one readable line (canonical spelling)."""
    text = f"{edge.src.name} -> {edge.dst.name}"
    if edge.when is not None:
        enc = encode_tree(edge.when)
        if edge.when.kind == "field":
            text += f" when {edge.when.field}"
        elif edge.when.kind == "not_field":
            text += f" when not {edge.when.field}"
        else:
            text += f" when {json.dumps(enc['expr'], ensure_ascii=False)}"
    if edge.loop is not None:
        bound = edge.loop.max if isinstance(edge.loop.max, int) else json.dumps(edge.loop.max, ensure_ascii=False)
        text += f" as {edge.loop.name}({bound})"
    if edge.with_map is not None:
        entries = sorted(edge.with_map.entries, key=lambda e: e.key)
        body = ", ".join(f"{e.key}: {_value_text(e.value)}" for e in entries)
        text += f" with {{ {body} }}"
    return text


def _value_text(value: object) -> str:
    if isinstance(value, ast.Literal):
        return json.dumps(value.value, ensure_ascii=False)
    if isinstance(value, ast.Ident):
        return value.name
    return json.dumps(encode_tree(value), ensure_ascii=False, sort_keys=True)


class _Graph:
    """What the impact rules read from one version of the unit."""

    def __init__(self, unit: UnitAst) -> None:
        self.unit = unit
        self.nodes = unit.nodes()
        self.edges = unit.edges()
        self.entry = unit.entry()
        self.refs = {n: names_in(decl.properties) for n, decl in self.nodes.items()}

    def predecessors(self, node: str) -> list[str]:
        return sorted({e.src.name for e in self.edges if e.dst.name == node and e.src.name in self.nodes})

    def referencing(self, name: str) -> list[str]:
        return sorted(n for n, refs in self.refs.items() if name in refs)

    def includes_of(self, node: str) -> set[str]:
        unit = self.unit
        reached: set[str] = set()
        decls = list(unit.decls.get(DeclKey("node", node), []))
        for ref in self.refs.get(node, ()):
            decls.extend(unit.decls.get(DeclKey("prompt", ref), []))
        for d in decls:
            for s in declaration_strings(d):
                reached.update(unit.include_closure(s, posixpath.dirname(d.path)))
        return reached

    def is_fail_node(self, node: str) -> bool:
        decl = self.nodes.get(node)
        return decl is not None and decl.kind == "fail"


# --- details -----------------------------------------------------------------------------


def _props(decl: object) -> dict[str, str]:
    props = getattr(decl, "properties", ())
    out: dict[str, list[str]] = {}
    for p in props:
        out.setdefault(p.name, []).append(json.dumps(encode_tree(p), sort_keys=True))
    return {k: "|".join(v) for k, v in out.items()}


def _node_detail(old: ast.NodeDecl, new: ast.NodeDecl) -> str:
    parts: list[str] = []
    if old.kind != new.kind:
        parts.append(f"kind {old.kind} -> {new.kind}")
    a, b = _props(old), _props(new)
    for name in sorted(set(a) | set(b)):
        if name not in a:
            parts.append(f"property {name!r} added")
        elif name not in b:
            parts.append(f"property {name!r} removed")
        elif a[name] != b[name]:
            parts.append(f"property {name!r} changed")
    return ", ".join(parts) or "changed"


def _edges_detail(old: list[ast.EdgeDecl], new: list[ast.EdgeDecl]) -> str:
    a = [edge_text(e) for e in old]
    b = [edge_text(e) for e in new]
    removed = [t for t in a if t not in b]
    added = [t for t in b if t not in a]
    if len(removed) == 1 and len(added) == 1:
        return f"`{removed[0]}` became `{added[0]}`"
    parts = [f"removed `{t}`" for t in removed] + [f"added `{t}`" for t in added]
    if not parts:
        parts.append("order changed" if sorted(a) == sorted(b) else "changed")
    return "; ".join(parts)


def _single(unit: UnitAst, key: DeclKey) -> object | None:
    decls = unit.decls.get(key, [])
    return decls[0].tree if len(decls) == 1 else None


def _detail(key: DeclKey, kind: ChangeKind, old: UnitAst, new: UnitAst) -> str:
    if kind is not ChangeKind.MODIFIED:
        tree = _single(new if kind is ChangeKind.ADDED else old, key)
        if key.kind == "node" and isinstance(tree, ast.NodeDecl):
            return f"{tree.kind} {key.name} {kind.value}"
        if key.kind == "edges" and isinstance(tree, list):
            return "; ".join(f"{kind.value} `{edge_text(e)}`" for e in tree)
        return f"{key} {kind.value}"
    a, b = _single(old, key), _single(new, key)
    if key.kind == "node" and isinstance(a, ast.NodeDecl) and isinstance(b, ast.NodeDecl):
        return _node_detail(a, b)
    if key.kind == "edges" and isinstance(a, list) and isinstance(b, list):
        return _edges_detail(a, b)
    if key == DeclKey("workflow", "entry"):
        return f"entry {old.entry()} -> {new.entry()}"
    if key.kind in ("prompt", "include", "preset_file"):
        return "text changed"
    if key.kind == "schema" and isinstance(a, ast.SchemaDecl) and isinstance(b, ast.SchemaDecl):
        fa = {f.name: json.dumps(encode_tree(f), sort_keys=True) for f in a.fields}
        fb = {f.name: json.dumps(encode_tree(f), sort_keys=True) for f in b.fields}
        names = sorted(n for n in set(fa) | set(fb) if fa.get(n) != fb.get(n))
        return f"fields changed: {', '.join(names)}" if names else "field order changed"
    return f"{key} changed"


# --- the diff ----------------------------------------------------------------------------


def diff_units(old: Sources, new: Sources, *, old_main: str | None = None, new_main: str | None = None,
               bundle: bool | None = None) -> UnitDiff:
    """Diff two versions of a unit (e.g. as recorded on a run, and as on disk now).

    Each version is a ``path -> text`` mapping, a list of recorded ``UnitFile`` or a parsed
    ``UnitAst``. Returns the changed declarations and the impacted nodes with the reasons.
    """
    ou = load_unit(old, main=old_main, bundle=bundle)
    nu = load_unit(new, main=new_main, bundle=bundle)
    og, ng = _Graph(ou), _Graph(nu)
    result = UnitDiff()

    def impact(node: str, reason: str) -> None:
        if node in TERMINALS or (node not in og.nodes and node not in ng.nodes):
            return
        reasons = result.impacted.setdefault(node, [])
        if reason not in reasons:
            reasons.append(reason)

    def impact_entry(reason: str) -> None:
        for entry in dict.fromkeys(e for e in (og.entry, ng.entry) if e):
            impact(entry, reason)

    for key in sorted(set(ou.decls) | set(nu.decls)):
        in_old, in_new = key in ou.decls, key in nu.decls
        if in_old and in_new:
            if encode_decl(ou.decls[key]) == encode_decl(nu.decls[key]):
                continue
            kind = ChangeKind.MODIFIED
        else:
            kind = ChangeKind.ADDED if in_new else ChangeKind.REMOVED
        path = (nu.decls[key] if in_new else ou.decls[key])[0].path
        detail = _detail(key, kind, ou, nu)
        change = DeclChange(key, kind, detail, path)
        result.changes.append(change)
        _map_change(change, og, ng, impact, impact_entry)

    result.impacted = {n: result.impacted[n] for n in sorted(result.impacted)}
    return result


def _map_change(change: DeclChange, og: _Graph, ng: _Graph, impact: Any, impact_entry: Any) -> None:
    key, kind = change.key, change.kind
    if key.kind == "node":
        name = key.name
        if kind is ChangeKind.MODIFIED:
            impact(name, f"node {name} changed: {change.detail}")
        elif kind is ChangeKind.ADDED:
            for src in ng.predecessors(name):
                impact(src, f"its edge now reaches the added node {name}")
        else:
            for src in og.predecessors(name):
                impact(src, f"its edge reached the removed node {name}")
        if kind is ChangeKind.MODIFIED and (og.is_fail_node(name) or ng.is_fail_node(name)):
            for src in sorted(set(og.predecessors(name)) | set(ng.predecessors(name))):
                impact(src, f"leads to the edited fail node {name}")
        return
    if key.kind == "edges":
        impact(key.name, f"edges from {key.name} changed: {change.detail}")
        return
    if key.kind in _REFERENCED_KINDS:
        users = sorted(set(og.referencing(key.name)) | set(ng.referencing(key.name)))
        for node in users:
            impact(node, f"uses {key}, which was {kind.value}")
        return
    if key.kind == "include":
        users = sorted({n for n in og.nodes if key.name in og.includes_of(n)}
                       | {n for n in ng.nodes if key.name in ng.includes_of(n)})
        for node in users:
            impact(node, f"includes {key.name}, which was {kind.value}")
        return
    if key.kind == "extension" and " " in key.name:
        name = key.name.split(" ", 1)[1]
        users = sorted(set(og.referencing(name)) | set(ng.referencing(name)))
        for node in users:
            impact(node, f"uses {key}, which was {kind.value}")
        if users:
            return
    # vars, presets, attachments, workflow settings, unnamed extensions (sandbox:, ...), a file
    # that no longer parses: workflow scope reaches everything, so the replay starts at the entry.
    impact_entry(f"{key} {kind.value}: workflow scope reaches the entry")
