"""The syntax tree of one `.bot` file: plain frozen dataclasses, each carrying its source span.

Every node has a ``span: Span`` field so a canonical encoding can drop spans generically.
Comments are not part of the tree. Property values stay generic (``Value``) here: which
properties a declaration accepts and what they mean is the compiler's job, so the tree of a
file that uses a property this version does not know still round-trips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from iterion.ir import Span

# --- values ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    """A string, int, float, bool or null literal (strings still hold ``${ENV}`` and ``{{...}}``)."""

    value: str | int | float | bool | None
    span: Span


@dataclass(frozen=True, slots=True)
class Ident:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class ListValue:
    items: tuple[Value, ...]
    span: Span
    trailing_comma: bool = False  # `[a, b,]`: allowed in some lists only (docs/language.md §1)


@dataclass(frozen=True, slots=True)
class MapEntry:
    key: str
    value: Value
    span: Span


@dataclass(frozen=True, slots=True)
class MapValue:
    """An inline map ``{ key: value, ... }``; keys keep declaration order (duplicates too)."""

    entries: tuple[MapEntry, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class RawText:
    """An indented raw block (a prompt or a script body), common indentation removed."""

    text: str
    span: Span  # where the body's first line starts
    indent: int  # columns removed from each line (to map offsets back to columns)


@dataclass(frozen=True, slots=True)
class Block:
    """A nested ``key:`` block whose body is more properties (budget:, expr:, sandbox:, ...)."""

    properties: tuple[Property, ...]
    span: Span


Value = Union[Literal, Ident, ListValue, MapValue, RawText, Block]


@dataclass(frozen=True, slots=True)
class Property:
    name: str
    value: Value
    span: Span


# --- declarations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TypeRef:
    name: str  # string | bool | int | float | json | string[] | file (checked by the compiler)
    span: Span


@dataclass(frozen=True, slots=True)
class VarDecl:
    name: str
    type: TypeRef
    default: Value | None
    span: Span


@dataclass(frozen=True, slots=True)
class VarsDecl:
    vars: tuple[VarDecl, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class PresetDecl:
    name: str
    values: tuple[Property, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class PresetsDecl:
    presets: tuple[PresetDecl, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class AttachmentDecl:
    name: str
    kind: Ident  # file | image
    properties: tuple[Property, ...]  # description, accept_mime, required
    span: Span


@dataclass(frozen=True, slots=True)
class AttachmentsDecl:
    attachments: tuple[AttachmentDecl, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class PromptDecl:
    name: str
    body: RawText
    span: Span


@dataclass(frozen=True, slots=True)
class EnumSpec:
    values: tuple[Literal, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class SchemaFieldDecl:
    name: str
    type: TypeRef
    enum: EnumSpec | None
    span: Span


@dataclass(frozen=True, slots=True)
class SchemaDecl:
    name: str
    fields: tuple[SchemaFieldDecl, ...]
    span: Span


class _HasProperties:
    properties: tuple[Property, ...]

    def prop(self, name: str) -> Property | None:
        """The first property called ``name`` (a repeat is the compiler's C105)."""
        return next((p for p in self.properties if p.name == name), None)


@dataclass(frozen=True, slots=True)
class NodeDecl(_HasProperties):
    """agent, judge, router, human, tool, compute or fail (a named fail terminal)."""

    kind: str
    name: str
    name_span: Span
    properties: tuple[Property, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ImportDecl:
    path: str
    span: Span


@dataclass(frozen=True, slots=True)
class WhenClause:
    kind: str  # field | not_field | expr (ir.ConditionKind values)
    field: str | None
    expr: Literal | None  # the quoted expression (kind == "expr")
    span: Span


@dataclass(frozen=True, slots=True)
class LoopClause:
    name: str
    max: int | str  # a literal bound, or a template "{{ref}}" resolved at run time
    span: Span


@dataclass(frozen=True, slots=True)
class EdgeDecl:
    src: Ident
    dst: Ident
    when: WhenClause | None
    loop: LoopClause | None
    with_map: MapValue | None
    span: Span


@dataclass(frozen=True, slots=True)
class WorkflowDecl(_HasProperties):
    name: str
    properties: tuple[Property, ...]  # entry, budget, worktree, default_backend, interaction, extensions
    vars: tuple[VarDecl, ...]
    edges: tuple[EdgeDecl, ...]  # declaration order
    span: Span
    attachments: tuple[AttachmentDecl, ...] = ()  # workflow-level `attachments:` (merged with the file's)


@dataclass(frozen=True, slots=True)
class ExtensionDecl:
    """A declaration the language accepts but this version keeps without executing
    (mcp_server NAME:, cursor NAME:, sandbox:, compaction:, tool_policy:, capabilities:, mcp:, memory:)."""

    keyword: str
    name: str | None
    body: Value
    span: Span


# PresetDecl on its own: a bundle's presets/*.md arrive as bare presets, not inside a PresetsDecl
Decl = Union[
    VarsDecl, PresetsDecl, PresetDecl, AttachmentsDecl, PromptDecl, SchemaDecl, NodeDecl, ImportDecl,
    WorkflowDecl, ExtensionDecl,
]


@dataclass(frozen=True, slots=True)
class File:
    path: str  # as shown in diagnostics
    decls: tuple[Decl, ...]
    span: Span
