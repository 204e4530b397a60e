"""The nested blocks of the language (docs/language.md §2.9, §2.10): their properties, kinds and checks.

``mcp:``, ``compaction:``, ``memory:``, ``sandbox:`` (with ``network:`` and ``build:``),
``cursors:``, ``tool_policy:``/``capabilities:``/``tools:`` lists, and the ``mcp_server`` and
``cursor`` declarations. The parser keeps them as generic blocks; this module is the one
table that says what each may hold. Every block is fully checked even where the engine does
not execute it yet: an unknown property is P007, a value of the wrong kind C100, an invalid
enumerated value C103, and the block rules their own codes (C025, C038, C043, C044, C048,
C080-C082, C084, C085). Checks across declarations (a cursor a node names, duplicate
servers/cursors, memory on another backend) are in ``check_unit``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

from iterion.backends.choice import CLAUDE_CODE, CLAW, declared_backend
from iterion.dsl import ast
from iterion.dsl.diagnostics import Sink
from iterion.dsl.grammar import suggest
from iterion.dsl.values import kind_of, to_py
from iterion.ir import Span

# --- the table -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Enum:
    choices: tuple[str, ...]


Kind = Union[str, Enum, "Schema"]  # "bool" "int" "number" "string" "name" "names" "strings" "refs" "list" "map"


@dataclass(frozen=True)
class Schema:
    props: dict[str, Kind]
    open_values: Kind | None = None  # any other key takes this kind (cursors:, env:, values:, bands:)


NETWORK = Schema({"mode": Enum(("allowlist", "denylist", "open")), "preset": "name_or_string",
                  "inherit": Enum(("merge", "replace", "append")), "rules": "list"})
BUILD = Schema({"dockerfile": "string", "context": "string", "args": "map"})
SANDBOX = Schema({
    # mode and host_state: an invalid value is C044 (docs/language.md §7), checked in BlockChecker.sandbox
    "mode": "name_or_string", "image": "string", "user": "string",
    "workspace_folder": "string", "post_create": "string", "host_state": "name_or_string",
    "env": "map", "mounts": "list", "network": NETWORK, "build": BUILD,
})
SANDBOX_MODES = ("auto", "none", "inline")
HOST_STATES = ("auto", "none")
MCP = Schema({"autoload_project": "bool", "inherit": "bool", "servers": "names", "disable": "names"})
COMPACTION = Schema({"threshold": "number", "preserve_recent": "int"})
MEMORY = Schema({"enabled": "bool", "scope": "string", "autoload": "strings", "read": "bool", "write": "bool",
                 "pre_compact_inject": "bool"})
CURSORS = Schema({"enabled": "bool"}, open_values="cursor_value")
AUTH = Schema({"type": "string", "auth_url": "string", "token_url": "string", "revoke_url": "string",
               "client_id": "string", "scopes": "strings"})
# env and inherit_env: this project's extension (docs/language.md section 8): a stdio server gets the
# MCP SDK's default variables, its env, and the variables inherit_env names, nothing else
MCP_SERVER = Schema({"transport": Enum(("stdio", "http", "sse")), "command": "string", "args": "strings",
                     "url": "string", "auth": AUTH, "env": Schema({}, open_values="string"),
                     "inherit_env": "strings"})
CURSOR = Schema({"description": "string", "values": Schema({}, open_values="string"),
                 "bands": Schema({}, open_values="string")})

# property name -> schema, for the blocks nodes and workflows take
BLOCKS: dict[str, Schema] = {"mcp": MCP, "compaction": COMPACTION, "memory": MEMORY, "sandbox": SANDBOX,
                             "cursors": CURSORS}
REF_LISTS = ("tools", "tool_policy", "capabilities")
DECLS: dict[str, Schema] = {"mcp_server": MCP_SERVER, "cursor": CURSOR}

KNOWN_CAPABILITIES = tuple(f"board.{a}" for a in ("read", "create", "move", "assign", "label", "close"))
BROWSER_IMAGES = ("sandbox-browser", "sandbox-full-browser")
_MIME = re.compile(r"^(?:\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)/(?:\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)$")
_CAPABILITY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$")
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\.\*)?$")
_BAND = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*\.\.\s*(\d+(?:\.\d+)?)\s*$")
_HTTP_URL = re.compile(r"^https?://[^\s/]+")


def _span_in(v: ast.Value) -> Span:
    return v.span


def _ref_text(v: ast.Value) -> str | None:
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.Literal) and isinstance(v.value, str):
        return v.value
    return None


class BlockChecker:
    """Checks one block property (or declaration body) against its schema, into ``sink``."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def err(self, code: str, span: Span, message: str, hint: str | None = None) -> None:
        self.sink.add(code, span, message, hint)

    # --- generic walk -----------------------------------------------------------------------

    def block(self, value: ast.Value, schema: Schema, where: str) -> dict[str, ast.Property]:
        """The block's properties by name (last wins), each checked against ``schema``."""
        if not isinstance(value, ast.Block):
            self.err("C100", value.span, f"{where} must be an indented block, not {kind_of(value)}")
            return {}
        out: dict[str, ast.Property] = {}
        for p in value.properties:
            kind = schema.props.get(p.name, schema.open_values)
            if kind is None:
                self.err("P007", p.span, f"unknown property '{p.name}' in {where}",
                         suggest(p.name, tuple(schema.props)))
                continue
            self.value(p, kind, f"'{p.name}' in {where}")
            out[p.name] = p
        return out

    def value(self, p: ast.Property, kind: Kind, where: str) -> None:
        v = p.value
        if isinstance(kind, Schema):
            self.block(v, kind, where)
            return
        if isinstance(kind, Enum):
            word = v.name if isinstance(v, ast.Ident) else v.value if isinstance(v, ast.Literal) else None
            if not isinstance(word, str) or word not in kind.choices:
                self.err("C103", v.span, f"invalid value {to_py(v)!r} for {where}",
                         "expected one of: " + ", ".join(kind.choices))
            return
        ok = True
        if kind == "bool":
            ok = isinstance(v, ast.Literal) and isinstance(v.value, bool)
        elif kind == "int":
            ok = isinstance(v, ast.Literal) and isinstance(v.value, int) and not isinstance(v.value, bool)
        elif kind == "number":
            ok = isinstance(v, ast.Literal) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool)
        elif kind == "string":
            ok = (isinstance(v, ast.Literal) and isinstance(v.value, str)) or isinstance(v, ast.RawText)
        elif kind == "name_or_string":
            ok = isinstance(v, ast.Ident) or (isinstance(v, ast.Literal) and isinstance(v.value, str))
        elif kind == "cursor_value":
            ok = isinstance(v, ast.Ident) or (isinstance(v, ast.Literal) and not isinstance(v.value, bool)
                                              and v.value is not None)
        elif kind == "names":
            if isinstance(v, ast.ListValue) and not v.items:  # at least one name, else a syntax error
                self.err("P008", v.span, f"{where} is an empty list; a name list holds at least one name")
                return
            if isinstance(v, ast.ListValue) and v.trailing_comma:
                self.err("P008", v.span, f"{where} ends with a comma; a name list takes none")
                return
            ok = isinstance(v, ast.ListValue) and all(isinstance(i, ast.Ident) for i in v.items)
        elif kind == "strings":
            ok = isinstance(v, ast.ListValue) and all(
                isinstance(i, ast.Literal) and isinstance(i.value, str) for i in v.items)
        elif kind == "list":
            ok = isinstance(v, ast.ListValue) and all(
                isinstance(i, ast.Ident) or (isinstance(i, ast.Literal) and isinstance(i.value, str)) for i in v.items)
        elif kind == "map":
            ok = isinstance(v, (ast.MapValue, ast.Block))
            if isinstance(v, ast.Block):
                for entry in v.properties:
                    if isinstance(entry.value, (ast.Block, ast.ListValue, ast.MapValue)):
                        self.err("C100", entry.value.span, f"'{entry.name}' of {where} must be a string or a name")
        if not ok:
            self.err("C100", v.span, f"{where} must be {_KIND_TEXT.get(str(kind), kind)}, not {kind_of(v)}")

    # --- the block properties of nodes and workflows --------------------------------------------

    def node_block(self, p: ast.Property, owner: str) -> Any:
        """Check a block property (sandbox, mcp, compaction, memory, cursors, a reference list)
        of ``owner``; returns its plain value for the IR."""
        name = p.name
        where = f"'{name}' of {owner}"
        if name in REF_LISTS:
            self.ref_list(p, owner)
        elif name == "sandbox":
            self.sandbox(p.value, where)
        elif name in BLOCKS:
            props = self.block(p.value, BLOCKS[name], where)
            if name == "compaction":
                self.compaction(props, where)
            elif name == "memory":
                scope = props.get("scope")
                enabled = props.get("enabled")
                if (enabled is not None and isinstance(enabled.value, ast.Literal) and enabled.value.value is True
                        and (scope is None or not str(to_py(scope.value)).strip())):
                    self.err("C048", enabled.span, f"{where} is enabled without a scope",
                             'add scope: "project" (the memory namespace)')
        return to_py(p.value)

    def ref_list(self, p: ast.Property, owner: str) -> bool:
        """Checks a tool-reference list; False if it is not a list at all (reported)."""
        v = p.value
        if isinstance(v, ast.ListValue) and not v.items:  # as observed (docs/language.md §1.6): a syntax error
            self.err("P008", v.span, f"'{p.name}' of {owner} is an empty list; a tool-reference list holds at least one item",
                     f"remove '{p.name}:' (absent: the workflow's), or name the items")
            return True
        if not isinstance(v, ast.ListValue):
            self.err("C100", v.span, f"'{p.name}' of {owner} must be a non-empty list of names",
                     f"e.g. {p.name}: [read_file, mcp.github.*]")
            return False
        if v.trailing_comma:
            self.err("P008", v.span, f"'{p.name}' of {owner} ends with a comma; a tool-reference list takes none",
                     "remove the last ','")
        for item in v.items:
            text = _ref_text(item)
            if text is None or not _REF.match(text):
                self.err("C100", item.span, f"'{p.name}' of {owner}: {to_py(item)!r} is not a tool reference",
                         "write a name, a dotted path, or a path ending in .*")
                continue
            if p.name == "capabilities":
                if not _CAPABILITY.match(text):
                    self.err("C081", item.span, f"capability {text!r} of {owner} is malformed",
                             "a capability is lowercase 'domain' or 'domain.action', e.g. board.read")
                elif text not in KNOWN_CAPABILITIES:
                    self.err("C080", item.span, f"unknown capability {text!r} in {owner}",
                             "known: " + ", ".join(KNOWN_CAPABILITIES))
        return True

    def compaction(self, props: dict[str, ast.Property], where: str) -> None:
        t = props.get("threshold")
        if t is not None and isinstance(t.value, ast.Literal) and isinstance(t.value.value, (int, float)) \
                and not isinstance(t.value.value, bool):
            num = float(t.value.value)
            if not math.isfinite(num) or num > 1:
                self.err("C043", t.value.span, f"threshold {t.value.value} in {where} is outside (0, 1]",
                         "a fraction of the context window, e.g. 0.85 (0 inherits)")

    def sandbox(self, v: ast.Value, where: str) -> None:
        if isinstance(v, (ast.Ident, ast.Literal)):
            word = to_py(v)
            if word not in SANDBOX_MODES:
                self.err("C044", v.span, f"invalid sandbox {word!r} in {where}", "expected auto, none or inline")
            return
        props = self.block(v, SANDBOX, where)
        if not isinstance(v, ast.Block):
            return
        hs = props.get("host_state")
        if hs is not None and to_py(hs.value) not in HOST_STATES:
            self.err("C044", hs.value.span, f"invalid host_state {to_py(hs.value)!r} in {where}", "expected auto or none")
        mode_p = props.get("mode")
        mode = to_py(mode_p.value) if mode_p is not None else "inline"
        if mode_p is not None and mode not in SANDBOX_MODES:
            self.err("C044", mode_p.value.span, f"invalid sandbox mode {mode!r} in {where}",
                     "expected one of: " + ", ".join(SANDBOX_MODES))
            return
        if mode == "inline":
            has = [k for k in ("image", "build") if k in props]
            if len(has) != 1:
                self.err("C044", v.span,
                         f"inline sandbox in {where} needs exactly one of image: or build:"
                         + (" (both given)" if len(has) == 2 else ""),
                         'e.g. image: "ghcr.io/org/dev:latest", or mode: auto to read .devcontainer')

    # --- declarations -------------------------------------------------------------------------

    def mcp_server(self, name: str, body: ast.Value, span: Span) -> None:
        where = f"mcp_server '{name}'"
        props = self.block(body, MCP_SERVER, where)
        if not isinstance(body, ast.Block):
            return
        tp = props.get("transport")
        transport = to_py(tp.value) if tp is not None else None
        if tp is None:
            self.err("C025", span, f"{where} has no transport", "add transport: stdio, http or sse")
        elif transport == "stdio":
            if "command" not in props:
                self.err("C025", tp.span, f"{where} uses stdio but has no command:")
            if "url" in props:
                self.err("C025", props["url"].span, f"{where} uses stdio, which takes no url:")
        elif transport in ("http", "sse"):
            if "url" not in props:
                self.err("C025", tp.span, f"{where} uses {transport} but has no url:")
            for k in ("command", "args"):
                if k in props:
                    self.err("C025", props[k].span, f"{where} uses {transport}, which takes no {k}:")
        auth = props.get("auth")
        if auth is not None and isinstance(auth.value, ast.Block):
            self.auth(auth.value, f"the auth of {where}")

    def auth(self, body: ast.Block, where: str) -> None:
        props = {p.name: p for p in body.properties}
        t = props.get("type")
        if t is None or to_py(t.value) != "oauth2":
            self.err("C038", (t.value if t is not None else body).span, f"{where} must have type: \"oauth2\"")
        for k in ("auth_url", "token_url", "revoke_url"):
            p = props.get(k)
            if p is not None and isinstance(p.value, ast.Literal) and isinstance(p.value.value, str) \
                    and not _HTTP_URL.match(p.value.value) and "$" not in p.value.value:
                self.err("C038", p.value.span, f"{k} of {where} is not an http(s) URL")
        for k in ("auth_url", "token_url"):
            if k not in props:
                self.err("C038", body.span, f"{where} has no {k}")

    def cursor(self, name: str, body: ast.Value, span: Span) -> None:
        where = f"cursor '{name}'"
        props = self.block(body, CURSOR, where)
        if not isinstance(body, ast.Block):
            return
        forms = [k for k in ("values", "bands") if k in props]
        if len(forms) != 1:
            self.err("C085", span, f"{where} needs exactly one of values: or bands:"
                     + (" (both given)" if len(forms) == 2 else ""))
            return
        form = props[forms[0]]
        if not isinstance(form.value, ast.Block) or not form.value.properties:
            self.err("C085", form.span, f"{where} has an empty {forms[0]}: block")
            return
        if forms[0] == "values":
            names: set[str] = set()
            for v in form.value.properties:
                if v.name in names:  # the original refuses a repeated name (issue 28), unlike a property
                    self.err("C085", v.span, f"value name '{v.name}' appears twice in the values: of {where}",
                             "each value of a cursor has its own name")
                names.add(v.name)
        if forms[0] == "bands":
            ranges: list[tuple[float, float, ast.Property]] = []
            for band in form.value.properties:
                m = _BAND.match(band.name)
                if m is None:
                    self.err("C085", band.span, f"band {band.name!r} of {where} is not a quoted \"lo..hi\" range")
                    continue
                lo, hi = float(m.group(1)), float(m.group(2))
                if not (0 <= lo <= hi <= 1):
                    self.err("C085", band.span, f"band {band.name!r} of {where} must lie in [0, 1] with lo <= hi")
                    continue
                for olo, ohi, other in ranges:
                    if lo <= ohi and olo <= hi:
                        self.err("C085", band.span, f"band {band.name!r} of {where} overlaps {other.name!r}",
                                 "bounds are inclusive: touching bands overlap")
                        break
                ranges.append((lo, hi, band))


_KIND_TEXT = {"bool": "true or false", "int": "an integer", "number": "a number", "string": "a quoted string",
              "names": "a non-empty list of names", "strings": "a list of quoted strings",
              "list": "a list of strings or names", "map": "a map or an indented block",
              "name_or_string": "a name or a string", "cursor_value": "a name, a number or a quoted string"}


# --- cursors at run and validate time -----------------------------------------------------------


def cursor_fragment(cursor: dict[str, Any], value: Any) -> str | None:
    """The fragment ``value`` selects in ``cursor`` (its plain IR form), or None if unresolvable
    (docs/language.md §2.10): a number in [0, 1] picks the band holding it, or position
    floor(v x count) of the values (clamped); otherwise it must be a values name."""
    values = cursor.get("values")
    bands = cursor.get("bands")
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is not None:
        if not (0 <= number <= 1):
            return None
        if isinstance(bands, dict):
            for key, frag in bands.items():
                m = _BAND.match(str(key))
                if m and float(m.group(1)) <= number <= float(m.group(2)):
                    return str(frag)
            return None
        if isinstance(values, dict) and values:
            items = list(values.values())
            return str(items[min(math.floor(number * len(items)), len(items) - 1)])
        return None
    if isinstance(values, dict) and isinstance(value, str) and value in values:
        return str(values[value])
    return None


def calibration_section(cursors: dict[str, Any], settings: dict[str, Any]) -> str:
    """The ``## Calibration`` text appended to a system prompt, or "" (docs/language.md §2.10): one
    ``**Name:** fragment`` line per resolvable cursor, sorted by cursor name."""
    if settings.get("enabled") is False:
        return ""
    lines: list[str] = []
    for name in sorted(k for k in settings if k != "enabled"):
        cursor = cursors.get(name)
        if not isinstance(cursor, dict):
            continue
        frag = cursor_fragment(cursor, settings[name])
        if frag is not None:
            lines.append(f"**{name}:** {frag}")
    return "## Calibration\n" + "\n".join(lines) if lines else ""


def cursor_settings(block: ast.Block) -> Iterable[ast.Property]:
    return (p for p in block.properties if p.name != "enabled")


# --- checks across declarations ------------------------------------------------------------------


def check_unit(wf: Any, decls: list[Any], nodes: list[ast.NodeDecl], sink: Sink) -> None:
    """C024/C086 duplicate servers/cursors, C083/C084 the cursors nodes name, C047 memory on a
    backend other than claw, C082 a board capability under an active workflow sandbox."""
    seen: dict[tuple[str, str], Span] = {}
    cursors: dict[str, Any] = {}
    for d in decls:
        if isinstance(d, ast.ExtensionDecl) and d.name is not None and d.keyword in ("mcp_server", "cursor"):
            key = (d.keyword, d.name)
            if key in seen:
                code = "C024" if d.keyword == "mcp_server" else "C086"
                sink.add(code, d.span, f"{d.keyword} '{d.name}' is declared twice (first at {seen[key]})",
                         "rename one of them")
                continue
            seen[key] = d.span
            if d.keyword == "cursor":
                cursors[d.name] = to_py(d.body) if isinstance(d.body, ast.Block) else {}
    sandbox = wf.extra.get("sandbox")
    sandbox_active = sandbox is not None and sandbox != "none" and not (
        isinstance(sandbox, dict) and sandbox.get("mode") == "none")
    for nd in nodes:
        owner = f"{nd.kind} '{nd.name}'"
        node = wf.nodes.get(nd.name)
        for p in nd.properties:
            if p.name == "cursors" and isinstance(p.value, ast.Block):
                for setting in cursor_settings(p.value):
                    _check_cursor_value(setting, cursors, owner, sink)
            elif p.name == "memory" and isinstance(p.value, ast.Block) and node is not None:
                backend = declared_backend(node.backend, wf.default_backend)
                if backend and "$" not in backend and backend.lower() != CLAW:
                    sink.add("C047", p.span, f"{owner} declares memory:, which only the claw backend uses "
                             f"(backend {backend})")
            elif p.name == "tools" and node is not None and isinstance(p.value, ast.ListValue):
                backend = declared_backend(node.backend, wf.default_backend)
                if backend and backend.lower() == CLAUDE_CODE:
                    _check_claude_tools(p.value, owner, sink)
            elif p.name == "capabilities" and sandbox_active and isinstance(p.value, ast.ListValue):
                for item in p.value.items:
                    text = _ref_text(item) or ""
                    if text == "board" or text.startswith("board."):
                        sink.add("C082", item.span, f"{owner} grants {text} while the workflow sandbox is active",
                                 "the board is on the host; a sandboxed run may not reach it")


def _check_claude_tools(tools: ast.ListValue, owner: str, sink: Sink) -> None:
    """C115: a claude_code node's tool that Claude Code has no name for (the map's one home is
    iterion.permissions.claude_tool_names; the run would refuse the node at its start)."""
    from iterion.permissions import claude_tool_names

    for item in tools.items:
        name = _ref_text(item)
        if not name or "$" in name:
            continue
        try:
            claude_tool_names([name])
        except ValueError as exc:
            sink.add("C115", item.span, f"{owner} runs on claude_code, which has no tool {name!r}",
                     str(exc).split("; ", 1)[-1])


def _check_cursor_value(setting: ast.Property, cursors: dict[str, Any], owner: str, sink: Sink) -> None:
    cursor = cursors.get(setting.name)
    if cursor is None:
        sink.add("C083", setting.span, f"{owner} sets unknown cursor '{setting.name}'",
                 suggest(setting.name, tuple(cursors)) if cursors else "declare it with 'cursor NAME:'")
        return
    value = to_py(setting.value)
    if isinstance(value, str) and "${" in value:
        return  # resolved when the node runs
    if cursor_fragment(cursor, value) is None:
        # docs/language.md §2.10: with bands, "the band containing it wins", so a number in a gap
        # between bands resolves to nothing: C084, as the original says
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            why = "no band holds it" if 0 <= value <= 1 and cursor.get("bands") else "a number must lie in [0, 1]"
        else:
            names = list(cursor.get("values") or {})
            why = "expected a number in [0, 1]" + (f" or one of: {', '.join(names)}" if names else "")
        sink.add("C084", setting.value.span, f"invalid value {value!r} for cursor '{setting.name}' in {owner}: {why}")


# --- checks over the declarations as written ------------------------------------------------------


def _word(v: ast.Value) -> str | None:
    return _ref_text(v)


def _get(v: ast.Value, name: str) -> ast.Property | None:
    """The last property ``name`` of a block (a repeat keeps the last value)."""
    found = None
    for p in v.properties if isinstance(v, ast.Block) else ():
        if p.name == name:
            found = p
    return found


def _number(v: ast.Value) -> float | None:
    if isinstance(v, ast.Literal) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        return float(v.value)
    return None


def check_blocks(decls: Iterable[ast.Decl], sink: Sink) -> None:
    """C030 backend codex, C037 a node's max_tokens above the budget's, C052 an accept_mime
    entry, C060 a Playwright MCP server under a sandbox image without a browser."""
    decls = list(decls)
    wf = next((d for d in decls if isinstance(d, ast.WorkflowDecl)), None)
    sandboxed = False
    image: str | None = None
    budget_tokens: float | None = None
    if wf is not None:
        for p in wf.properties:
            if p.name == "sandbox":
                mode = _word(_get(p.value, "mode").value) if _get(p.value, "mode") else (  # type: ignore[union-attr]
                    "inline" if isinstance(p.value, ast.Block) else _word(p.value))
                sandboxed = mode != "none"
                img = _get(p.value, "image")
                image = _word(img.value) if img is not None else None
            elif p.name == "budget":
                mt = _get(p.value, "max_tokens")
                budget_tokens = _number(mt.value) if mt is not None else None
    for nd in (d for d in decls if isinstance(d, ast.NodeDecl)):
        owner = f"{nd.kind} '{nd.name}'"
        for p in nd.properties:
            if p.name == "backend" and _word(p.value) == "codex":
                sink.add("C030", p.value.span, f"{owner} uses backend codex, which is discouraged",
                         "prefer claw or claude_code")
            elif p.name == "max_tokens" and budget_tokens is not None:
                n = _number(p.value)
                if n is not None and n > budget_tokens:
                    sink.add("C037", p.value.span, f"max_tokens of {owner} ({n:g}) is above the workflow budget "
                             f"({budget_tokens:g})", "the budget stops the run first; lower one of them")
    if sandboxed and image is not None and not any(b in image for b in BROWSER_IMAGES):
        for x in decls:
            if isinstance(x, ast.ExtensionDecl) and x.keyword == "mcp_server" and _mentions_playwright(x):
                sink.add("C060", x.span, f"mcp_server '{x.name}' runs Playwright, but the workflow sandbox image "
                         f"'{image}' has no browser", "use a sandbox-browser or sandbox-full-browser image")
    attachment_blocks = [d.attachments for d in decls if isinstance(d, ast.AttachmentsDecl)]
    if wf is not None:
        attachment_blocks.append(wf.attachments)
    for block in attachment_blocks:
        for a in block:
            for p in a.properties:
                if p.name == "accept_mime" and isinstance(p.value, ast.ListValue):
                    for item in p.value.items:
                        m = _word(item)
                        if m is not None and not _MIME.match(m):
                            sink.add("C052", item.span, f"accept_mime entry '{m}' of attachment '{a.name}' "
                                     "is not type/subtype", 'e.g. "application/pdf" or "image/*"')


def _mentions_playwright(d: ast.ExtensionDecl) -> bool:
    if "playwright" in (d.name or "").lower():
        return True
    for key in ("command", "args", "url"):
        p = _get(d.body, key)
        if p is None:
            continue
        items = p.value.items if isinstance(p.value, ast.ListValue) else (p.value,)
        if any("playwright" in (_word(x) or "").lower() for x in items):
            return True
    return False
