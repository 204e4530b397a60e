"""The canonical encoding of a unit's syntax tree: what `rewind --auto` compares.

Two sources that differ only in comments, blank lines, line shifts, indentation of raw
blocks, the order of top-level declarations, the file a declaration lives in (main or an
imported fragment), the order of a declaration's properties or of an inline map's keys, or
the spelling of an expression (whitespace, quote style, redundant parentheses) encode
identically. Everything else is a change.

Ordering choices (the engine's semantics decide them):
- Edges are grouped by their source node. Within one source the declaration order is KEPT,
  because the engine breaks ties by it (first matching condition, fan-out branch order,
  round-robin cycle). The interleaving of edges of different sources is not meaningful.
- List values, schema fields and enum values keep their order (a schema's field order shows in
  prompts and answers); properties and map entries are sorted by name (stable, so duplicates,
  which the validator reports, keep their relative order).

A unit's declarations are keyed by ``DeclKey(kind, name)``:
``var``/``preset``/``attachment``/``prompt``/``schema``/``node`` NAME, ``workflow`` PROPERTY
(plus ``workflow name``), ``edges`` SOURCE, ``extension`` KEYWORD[ NAME], ``preset_file``
NAME (a bundle's presets/*.md), ``include`` PATH (a file a `{{include}}` reads), ``import``
PATH (an import whose file is not among the sources) and ``unparsed`` PATH (a file with parse
errors: its meaningful lines, since the tree may lack what the parser skipped).
"""

from __future__ import annotations

import functools
import json
import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, NamedTuple

from iterion.dsl import ast
from iterion.dsl.errors import HintedError
from iterion.dsl.lexer import physical_lines
from iterion.dsl.loader import load_tree, resolve_import
from iterion.dsl.parser import parse
from iterion.dsl.unit import UnitFile, UnitRole
from iterion.expr import ExprSyntaxError, format_expr, parse_expr
from iterion.templates import TemplateSyntaxError, relative_target, template_includes

# spelling, not meaning: positions, indentation, a trailing comma in a list
_DROPPED_FIELDS = frozenset({"span", "name_span", "indent", "trailing_comma"})
BOT_SUFFIXES = (".bot", ".iter")


def _leaves(obj: object) -> Iterator[ast.RawText | ast.Literal | ast.Ident]:
    """Every raw block, literal and identifier in a tree (any order; spans are not walked)."""
    stack: list[object] = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.RawText, ast.Literal, ast.Ident)):
            yield node
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
        elif is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, name) for name in _walked_fields(type(node)))


def template_strings(decls: Iterable[object]) -> list[str]:
    """Every string in a tree that may hold `{{...}}` markers: prompt bodies, raw blocks and
    string literals (over-collecting only costs a scan)."""
    found: list[str] = []
    for leaf in _leaves(list(decls)):
        if isinstance(leaf, ast.RawText):
            found.append(leaf.text)
        elif isinstance(leaf, ast.Literal) and isinstance(leaf.value, str) and "{{" in leaf.value:
            found.append(leaf.value)
    return found


@functools.cache
def _walked_fields(cls: type) -> tuple[str, ...]:
    # dataclasses.fields() is slow enough to dominate a walk over a large unit: cache per class
    return tuple(f.name for f in fields(cls) if f.name not in _DROPPED_FIELDS)


def imports_of(tree: ast.File) -> list[str]:
    return [d.path for d in tree.decls if isinstance(d, ast.ImportDecl)]


class UnitError(HintedError):
    """The sources do not form a unit (no main file can be told apart)."""


class DeclKey(NamedTuple):
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass
class Decl:
    """One declaration of the unit: where it is and its syntax (``tree``) or text."""

    key: DeclKey
    path: str
    tree: object  # an ast node, a list of EdgeDecl for ``edges``, or a str for file-backed keys


@dataclass
class UnitAst:
    """The parsed unit: every declaration reachable from the main file, keyed."""

    main: str
    texts: dict[str, str]
    trees: dict[str, ast.File] = field(default_factory=dict)  # main + reachable fragments
    decls: dict[DeclKey, list[Decl]] = field(default_factory=dict)

    def add(self, key: DeclKey, path: str, tree: object) -> None:
        self.decls.setdefault(key, []).append(Decl(key, path, tree))

    def nodes(self) -> dict[str, ast.NodeDecl]:
        return {k.name: d[0].tree for k, d in self.decls.items()
                if k.kind == "node" and isinstance(d[0].tree, ast.NodeDecl)}

    def edges(self) -> list[ast.EdgeDecl]:
        return [e for k, ds in self.decls.items() if k.kind == "edges" for d in ds for e in d.tree]  # type: ignore[attr-defined]

    def entry(self) -> str | None:
        for d in self.decls.get(DeclKey("workflow", "entry"), []):
            value = getattr(d.tree, "value", None)
            if isinstance(value, ast.Ident):
                return value.name
            if isinstance(value, ast.Literal) and isinstance(value.value, str):
                return value.value
        return None

    def include_closure(self, text: str, base: str) -> list[str]:
        """Paths (relative to the main's dir) that `{{include}}` markers in ``text`` reach,
        looked up among the unit's sources, nested ones too."""
        found: list[str] = []
        stack: list[tuple[str, str]] = [(text, base)]
        while stack:
            body, here = stack.pop()
            try:
                incs = template_includes(body)
            except TemplateSyntaxError:
                continue
            for inc in incs:
                target = relative_target(here, inc.path)
                if target in found:
                    continue
                found.append(target)
                if target in self.texts:
                    stack.append((self.texts[target], posixpath.dirname(target)))
        return found


Sources = Mapping[str, str] | Sequence[UnitFile] | str | UnitAst


def _infer_main(texts: Mapping[str, str]) -> str:
    bots = [p for p in texts if p.endswith(BOT_SUFFIXES)]
    if len(bots) == 1:
        return bots[0]
    imported: set[str] = set()
    for p in bots:
        tree, _ = parse(texts[p], p)
        imported.update(resolve_import(p, i) for i in imports_of(tree))
    roots = [p for p in bots if p not in imported]
    if len(roots) == 1:
        return roots[0]
    if "main.bot" in texts:
        return "main.bot"
    raise UnitError(f"cannot tell the main file among {sorted(bots) or sorted(texts)}",
                    hint="pass main= explicitly")


def load_unit(sources: Sources, *, main: str | None = None, bundle: bool | None = None) -> UnitAst:
    """Parse a unit from recorded files or a ``path -> text`` mapping (paths relative to the
    main file's directory). Recorded ``UnitFile`` lists carry their roles. For a mapping,
    ``bundle`` says whether ``prompts/*.md`` and ``presets/*.md`` are a bundle's prompts and
    presets; None (the default) guesses, erring toward yes (see ``_bundle_kind``)."""
    if isinstance(sources, UnitAst):
        return sources
    roles: dict[str, UnitRole] = {}
    if isinstance(sources, str):
        texts = {main or "main.bot": sources}
    elif isinstance(sources, Mapping):
        texts = dict(sources)
    else:
        texts = {f.path: f.text for f in sources}
        roles = {f.path: f.role for f in sources}
    # the loader addresses files by normalised paths: so do we
    texts = {posixpath.normpath(p): t for p, t in texts.items()}
    roles = {posixpath.normpath(p): r for p, r in roles.items()}
    if main is None:
        mains = [p for p, r in roles.items() if r is UnitRole.MAIN]
        main = mains[0] if len(mains) == 1 else _infer_main(texts)
    main = posixpath.normpath(main)
    if main not in texts:
        raise UnitError(f"main file {main!r} is not among the sources")
    unit = UnitAst(main=main, texts=texts)

    # the main and the fragments its imports reach, as the loader resolves them (parsed only:
    # the encoding is of the syntax tree, and includes are looked up among ``texts`` below)
    loaded = load_tree(texts, main, env={}, parse_only=True).unit
    for tree in loaded.asts:
        path = tree.path
        unit.trees[path] = tree
        if path in loaded.unparsed:
            # The parser skipped what it could not read, so the tree may miss an edit: keep the
            # file's meaningful lines as a declaration of their own (workflow scope in the diff).
            unit.add(DeclKey("unparsed", path), path, _meaningful_lines(texts[path]))
        for rel in imports_of(tree):
            target = resolve_import(path, rel)
            if target not in texts:
                unit.add(DeclKey("import", target), path, rel)
    for path, tree in unit.trees.items():
        for decl in tree.decls:
            _add_decl(unit, path, decl)

    base = posixpath.dirname(main)
    tree_includes = _reached_includes(unit)
    referenced = {name for decls in unit.decls.values() for d in decls
                  if isinstance(d.tree, ast.NodeDecl) for name in names_in(d.tree.properties)}
    for path, text in texts.items():
        role = roles.get(path)
        if roles:
            kind = {UnitRole.BUNDLE_PROMPT: "prompt", UnitRole.BUNDLE_PRESET: "preset_file"}.get(role)  # type: ignore[arg-type]
        else:
            kind = _bundle_kind(path, base, bundle, tree_includes, referenced)
        if kind is not None:
            unit.add(DeclKey(kind, posixpath.basename(path)[:-3]), path, text)

    # every file an include marker of the unit reaches (nested), as its own declaration
    for target in _reached_includes(unit):
        unit.add(DeclKey("include", target), target, texts.get(target))
    return unit


def _bundle_kind(path: str, base: str, bundle: bool | None, tree_includes: list[str],
                 referenced: set[str]) -> str | None:
    """Is ``path`` of a role-less mapping a bundle prompt ("prompt") or preset ("preset_file")?

    With ``bundle=None`` a ``prompts/*.md`` or ``presets/*.md`` counts, unless it is only an
    included file (reached by an include marker and named by no node): the diff errs toward
    more, so a file that may be a bundle prompt is treated as one."""
    if bundle is False:
        return None
    rel = posixpath.relpath(path, base or ".")
    sub, _, fname = rel.partition("/")
    if not fname.endswith(".md") or "/" in fname or sub not in ("prompts", "presets"):
        return None
    if bundle is None and path in tree_includes and fname[:-3] not in referenced:
        return None
    return "prompt" if sub == "prompts" else "preset_file"


def _reached_includes(unit: UnitAst) -> list[str]:
    reached: list[str] = []
    for decls in unit.decls.values():
        for d in decls:
            for s in declaration_strings(d):
                for target in unit.include_closure(s, posixpath.dirname(d.path)):
                    if target not in reached:
                        reached.append(target)
    return reached


def names_in(obj: object) -> set[str]:
    """Identifiers and string literals anywhere in ``obj`` (what a node may reference), plus
    the cursors a ``cursors:`` block sets (its keys) and the server of an ``mcp.SERVER.TOOL``
    or ``mcp.SERVER.*`` tool reference."""
    names: set[str] = set()
    for leaf in _leaves(obj):
        text = leaf.name if isinstance(leaf, ast.Ident) else leaf.value if isinstance(leaf, ast.Literal) else None
        if isinstance(text, str):
            names.add(text)
            parts = text.split(".")
            if len(parts) >= 3 and parts[0] == "mcp":
                names.add(parts[1])
    for block in _cursor_blocks(obj):
        names.update(p.name for p in block.properties if p.name != "enabled")
    return names


def _cursor_blocks(obj: object) -> Iterator[ast.Block]:
    stack: list[object] = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Property) and node.name == "cursors" and isinstance(node.value, ast.Block):
            yield node.value
        elif isinstance(node, (tuple, list)):
            stack.extend(node)
        elif isinstance(node, (ast.NodeDecl, ast.Block)):
            stack.extend(node.properties)


def _meaningful_lines(text: str) -> str:
    """A file's lines without comments, blank lines or trailing spaces."""
    lines = physical_lines(text)
    return "\n".join(ln.rstrip() for ln in lines if ln.strip() and not ln.lstrip().startswith("##"))


def declaration_strings(decl: Decl) -> list[str]:
    """Strings of a declaration that may hold template markers."""
    if isinstance(decl.tree, str):
        return [decl.tree] if decl.key.kind in ("prompt", "include") else []
    return template_strings([decl.tree])


def _add_decl(unit: UnitAst, path: str, decl: object) -> None:
    if isinstance(decl, ast.VarsDecl):
        for v in decl.vars:
            unit.add(DeclKey("var", v.name), path, v)
    elif isinstance(decl, ast.PresetsDecl):
        for p in decl.presets:
            unit.add(DeclKey("preset", p.name), path, p)
    elif isinstance(decl, ast.AttachmentsDecl):
        for a in decl.attachments:
            unit.add(DeclKey("attachment", a.name), path, a)
    elif isinstance(decl, ast.PromptDecl):
        unit.add(DeclKey("prompt", decl.name), path, decl)
    elif isinstance(decl, ast.SchemaDecl):
        unit.add(DeclKey("schema", decl.name), path, decl)
    elif isinstance(decl, ast.NodeDecl):
        unit.add(DeclKey("node", decl.name), path, decl)
    elif isinstance(decl, ast.ImportDecl):
        pass  # resolved: the fragment's declarations are the unit's
    elif isinstance(decl, ast.WorkflowDecl):
        unit.add(DeclKey("workflow", "name"), path, decl.name)
        for prop in decl.properties:
            unit.add(DeclKey("workflow", prop.name), path, prop)
        for v in decl.vars:
            unit.add(DeclKey("var", v.name), path, v)
        for a in decl.attachments:
            unit.add(DeclKey("attachment", a.name), path, a)
        by_src: dict[str, list[ast.EdgeDecl]] = {}
        for e in decl.edges:
            by_src.setdefault(e.src.name, []).append(e)
        for src, edges in by_src.items():
            unit.add(DeclKey("edges", src), path, edges)
    elif isinstance(decl, ast.ExtensionDecl):
        name = decl.keyword if decl.name is None else f"{decl.keyword} {decl.name}"
        unit.add(DeclKey("extension", name), path, decl)
    else:
        unit.add(DeclKey("other", type(decl).__name__), path, decl)


# --- encoding ----------------------------------------------------------------------------


def _norm_expr(src: Any) -> Any:
    if not isinstance(src, str):
        return src
    try:
        return format_expr(parse_expr(src))
    except ExprSyntaxError:
        return src


def encode_tree(obj: Any, *, in_compute_expr: bool = False) -> Any:
    """A JSON-able, span-free form of an AST value (see the module docstring for ordering)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [encode_tree(x) for x in obj]
    if isinstance(obj, ast.Literal):
        value = _norm_expr(obj.value) if in_compute_expr else obj.value
        return {"lit": value}
    if isinstance(obj, ast.Ident):
        return {"ident": obj.name}
    if isinstance(obj, ast.RawText):
        return {"raw": obj.text}
    if isinstance(obj, ast.MapValue):
        entries = sorted(obj.entries, key=lambda e: e.key)
        return {"map": [[e.key, encode_tree(e.value)] for e in entries]}
    if isinstance(obj, ast.Block):
        return {"block": _encode_props(obj.properties, in_compute_expr=in_compute_expr)}
    if isinstance(obj, ast.NodeDecl):
        return {"node": obj.kind, "props": _encode_props(obj.properties, node_kind=obj.kind)}
    if isinstance(obj, ast.Property):
        return {"prop": obj.name, "value": encode_tree(obj.value)}
    if isinstance(obj, ast.WhenClause):
        expr = _norm_expr(obj.expr.value) if obj.expr is not None else None
        return {"when": obj.kind, "field": obj.field, "expr": expr}
    if isinstance(obj, ast.EdgeDecl):
        return {"edge": obj.src.name, "to": obj.dst.name, "when": encode_tree(obj.when),
                "loop": encode_tree(obj.loop), "with": encode_tree(obj.with_map)}
    if is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"@": type(obj).__name__}
        for name in _walked_fields(type(obj)):
            out[name] = encode_tree(getattr(obj, name))
        return out
    return repr(obj)


def _encode_props(props: Iterable[ast.Property], *, node_kind: str | None = None,
                  in_compute_expr: bool = False) -> list[list[Any]]:
    ordered = sorted(props, key=lambda p: p.name)
    out: list[list[Any]] = []
    for p in ordered:
        compute = in_compute_expr or (node_kind == "compute" and p.name == "expr")
        out.append([p.name, encode_tree(p.value, in_compute_expr=compute)])
    return out


def _dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def encode_decl(decls: Sequence[Decl]) -> str:
    encoded = [encode_tree(d.tree) for d in decls]
    if len(encoded) == 1:
        return _dump(encoded[0])
    # the same key declared twice (an error the validator reports): order-free, all kept
    return _dump({"duplicates": sorted(_dump(e) for e in encoded)})


def declaration_encodings(unit_or_sources: Sources, *, main: str | None = None,
                          bundle: bool | None = None) -> dict[DeclKey, str]:
    """Each declaration's canonical encoding, keyed and sorted by ``DeclKey``."""
    unit = load_unit(unit_or_sources, main=main, bundle=bundle)
    return {key: encode_decl(unit.decls[key]) for key in sorted(unit.decls)}


def canonical_encoding(unit_or_sources: Sources, *, main: str | None = None,
                       bundle: bool | None = None) -> str:
    """The whole unit as one deterministic string (equal iff no semantic change)."""
    encs = declaration_encodings(unit_or_sources, main=main, bundle=bundle)
    return _dump([[key.kind, key.name, json.loads(enc)] for key, enc in encs.items()])
