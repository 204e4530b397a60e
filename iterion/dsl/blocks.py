"""Checks of the shared blocks and of the mcp_server / cursor declarations (dsl.md 2.9, 2.10, 2.13).

Read from the syntax tree (the blocks are parsed generically), so the rules hold whatever the
compiler keeps of them: backend codex (C030), unknown properties inside a block (P007), mcp_server (C024, C025,
C038, C060), compaction (C043), sandbox (C044), memory (C047, C048), capabilities (C080,
C081, C082), cursors (C083, C084, C085, C086), a node's max_tokens above the budget's (C037),
attachment mime types (C052). A check of a construct that does not parse yet (cursor bands,
whose keys are quoted) only looks at what does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from iterion.dsl import ast
from iterion.dsl.diagnostics import Sink
from iterion.dsl.grammar import suggest
from iterion.dsl.values import kind_of

MCP_SERVER_PROPS = ("transport", "command", "args", "url", "auth")
AUTH_PROPS = ("type", "auth_url", "token_url", "revoke_url", "client_id", "scopes")
TRANSPORTS = ("stdio", "http", "sse")
COMPACTION_PROPS = ("threshold", "preserve_recent")
MEMORY_PROPS = ("enabled", "scope", "autoload", "read", "write", "pre_compact_inject")
MCP_PROPS = ("autoload_project", "inherit", "servers", "disable")
SANDBOX_PROPS = ("mode", "image", "user", "workspace_folder", "post_create", "host_state", "env", "mounts",
                 "network", "build")
SANDBOX_MODES = ("auto", "none", "inline")
HOST_STATES = ("auto", "none")
NETWORK_PROPS = ("mode", "preset", "inherit", "rules")
BUILD_PROPS = ("dockerfile", "context", "args")
CURSOR_PROPS = ("description", "values", "bands")
KNOWN_CAPABILITIES = tuple(f"board.{a}" for a in ("read", "create", "move", "assign", "label", "close"))
BROWSER_IMAGES = ("sandbox-browser", "sandbox-full-browser")
_CAPABILITY = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)?$")
_MIME = re.compile(r"^(?:\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)/(?:\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)$")


def _word(v: ast.Value) -> str | None:
    if isinstance(v, ast.Ident):
        return v.name
    if isinstance(v, ast.Literal) and isinstance(v.value, str):
        return v.value
    return None


def _props(v: ast.Value) -> tuple[ast.Property, ...]:
    return v.properties if isinstance(v, ast.Block) else ()


def _get(v: ast.Value, name: str) -> ast.Property | None:
    """The last property ``name`` of a block (a repeat keeps the last value)."""
    found = None
    for p in _props(v):
        if p.name == name:
            found = p
    return found


def _number(v: ast.Value) -> float | None:
    if isinstance(v, ast.Literal) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        return float(v.value)
    return None


class _Blocks:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.cursors: dict[str, ast.ExtensionDecl] = {}

    def unknown(self, block: ast.Value, allowed: tuple[str, ...], owner: str) -> None:
        for p in _props(block):
            if p.name not in allowed:
                self.sink.add("P007", p.span, f"unknown property '{p.name}' in {owner}", suggest(p.name, allowed))

    def block_or_c100(self, prop: ast.Property, owner: str) -> bool:
        if isinstance(prop.value, ast.Block):
            return True
        self.sink.add("C100", prop.value.span, f"'{prop.name}' of {owner} must be a block, not {kind_of(prop.value)}",
                      f"write '{prop.name}:' and its properties on the following, indented lines")
        return False

    # --- declarations -------------------------------------------------------------------------

    def mcp_servers(self, decls: list[ast.ExtensionDecl]) -> None:
        seen: dict[str, ast.ExtensionDecl] = {}
        for d in decls:
            name = d.name or ""
            owner = f"mcp_server '{name}'"
            if name in seen:
                self.sink.add("C024", d.span, f"mcp_server '{name}' is declared twice (first at {seen[name].span})",
                              "rename one of them")
                continue
            seen[name] = d
            body = d.body
            self.unknown(body, MCP_SERVER_PROPS, owner)
            tp = _get(body, "transport")
            has = {p.name for p in _props(body)}
            if tp is None:
                self.sink.add("C025", d.span, f"{owner} has no transport", "add transport: stdio, http or sse")
            else:
                transport = _word(tp.value)
                if transport not in TRANSPORTS:
                    self.sink.add("C103", tp.value.span, f"invalid transport {transport or kind_of(tp.value)!r} in {owner}",
                                  "expected one of: " + ", ".join(TRANSPORTS))
                elif transport == "stdio":
                    if "command" not in has:
                        self.sink.add("C025", tp.span, f"{owner} uses transport stdio but has no command")
                    if "url" in has:
                        self.sink.add("C025", _get(body, "url").span,  # type: ignore[union-attr]
                                      f"{owner} uses transport stdio, which takes no url")
                else:
                    if "url" not in has:
                        self.sink.add("C025", tp.span, f"{owner} uses transport {transport} but has no url")
                    for bad in ("command", "args"):
                        if bad in has:
                            self.sink.add("C025", _get(body, bad).span,  # type: ignore[union-attr]
                                          f"{owner} uses transport {transport}, which takes no {bad}")
            auth = _get(body, "auth")
            if auth is not None and self.block_or_c100(auth, owner):
                self.auth(auth, owner)

    def auth(self, auth: ast.Property, owner: str) -> None:
        where = f"auth of {owner}"
        self.unknown(auth.value, AUTH_PROPS, where)
        typ = _get(auth.value, "type")
        if typ is None or _word(typ.value) != "oauth2":
            span = typ.value.span if typ is not None else auth.span
            self.sink.add("C038", span, f"{where}: type must be \"oauth2\"", 'add type: "oauth2"')
        for req in ("auth_url", "token_url", "client_id"):
            if _get(auth.value, req) is None:
                self.sink.add("C038", auth.span, f"{where} has no {req}")
        for key in ("auth_url", "token_url", "revoke_url"):
            p = _get(auth.value, key)
            if p is None:
                continue
            url = _word(p.value)
            if not isinstance(p.value, ast.Literal) or url is None or not re.match(r"^https?://\S+$", url):
                self.sink.add("C038", p.value.span, f"{key} of {where} must be an http(s) URL")

    def cursor_decls(self, decls: list[ast.ExtensionDecl]) -> None:
        for d in decls:
            name = d.name or ""
            owner = f"cursor '{name}'"
            if name in self.cursors:
                self.sink.add("C086", d.span, f"cursor '{name}' is declared twice (first at {self.cursors[name].span})",
                              "rename one of them")
                continue
            self.cursors[name] = d
            self.unknown(d.body, CURSOR_PROPS, owner)
            values, bands = _get(d.body, "values"), _get(d.body, "bands")
            if (values is None) == (bands is None):
                self.sink.add("C085", d.span, f"{owner} needs exactly one of values: or bands:",
                              'values: lists name: "fragment" lines; bands: lists "lo..hi": "fragment" lines')

    # --- shared blocks ------------------------------------------------------------------------

    def compaction(self, prop: ast.Property, owner: str) -> None:
        if not self.block_or_c100(prop, owner):
            return
        where = f"compaction of {owner}"
        self.unknown(prop.value, COMPACTION_PROPS, where)
        th = _get(prop.value, "threshold")
        if th is not None:
            num = _number(th.value)
            if num is None:
                self.sink.add("C100", th.value.span, f"threshold of {where} must be a number")
            elif num != 0 and not (0 < num <= 1 and math.isfinite(num)):  # 0 inherits
                self.sink.add("C043", th.value.span, f"threshold of {where} is {th.value.value}; it must lie in (0, 1]",  # type: ignore[union-attr]
                              "0.85 compacts when 85% of the context is used")
        pr = _get(prop.value, "preserve_recent")
        if pr is not None:
            num = _number(pr.value)
            if num is None or num != int(num):
                self.sink.add("C100", pr.value.span, f"preserve_recent of {where} must be an integer")
            elif num < 0:
                self.sink.add("C043", pr.value.span, f"preserve_recent of {where} must be at least 0")

    def memory(self, prop: ast.Property, owner: str, backend: str | None) -> None:
        if not self.block_or_c100(prop, owner):
            return
        where = f"memory of {owner}"
        self.unknown(prop.value, MEMORY_PROPS, where)
        en = _get(prop.value, "enabled")
        enabled = en is not None and isinstance(en.value, ast.Literal) and en.value.value is True
        if enabled and _get(prop.value, "scope") is None:
            self.sink.add("C048", en.span if en else prop.span, f"{where} is enabled but has no scope",
                          'add scope: "NAME" (memories are kept per scope)')
        if enabled and backend is not None and "$" not in backend and backend not in ("claw", "", "auto"):
            self.sink.add("C047", prop.span, f"{where}: only the claw backend uses memory, and this node uses {backend}")

    def mcp(self, prop: ast.Property, owner: str) -> None:
        if self.block_or_c100(prop, owner):
            self.unknown(prop.value, MCP_PROPS, f"mcp of {owner}")

    def sandbox(self, prop: ast.Property, owner: str) -> bool:
        """Checks a ``sandbox:`` setting; True if it makes a sandbox active (not ``none``)."""
        v = prop.value
        where = f"sandbox of {owner}"
        if not isinstance(v, ast.Block):
            mode = _word(v)
            if mode not in SANDBOX_MODES:
                self.sink.add("C044", v.span, f"invalid {where} {mode or kind_of(v)!r}",
                              "expected auto, none, inline, or a block")
                return False
            if mode == "inline":
                self.sink.add("C044", v.span, f"{where} is inline but has neither image nor build",
                              "write a sandbox: block with image: or build:")
            return mode != "none"
        self.unknown(v, SANDBOX_PROPS, where)
        mp = _get(v, "mode")
        mode = _word(mp.value) if mp is not None else "inline"
        if mp is not None and mode not in SANDBOX_MODES:
            self.sink.add("C044", mp.value.span, f"invalid mode {mode or kind_of(mp.value)!r} in {where}",
                          "expected one of: " + ", ".join(SANDBOX_MODES))
            return False
        hs = _get(v, "host_state")
        if hs is not None and _word(hs.value) not in HOST_STATES:
            self.sink.add("C044", hs.value.span, f"invalid host_state in {where}", "expected auto or none")
        if mode == "inline":
            n = sum(1 for k in ("image", "build") if _get(v, k) is not None)
            if n != 1:
                self.sink.add("C044", prop.span, f"{where} is inline and needs exactly one of image and build, "
                              f"not {'neither' if n == 0 else 'both'}")
        for sub, allowed in (("network", NETWORK_PROPS), ("build", BUILD_PROPS)):
            sp = _get(v, sub)
            if sp is not None and isinstance(sp.value, ast.Block):
                self.unknown(sp.value, allowed, f"{sub} of {where}")
        return mode != "none"

    def capabilities(self, prop: ast.Property, owner: str, sandboxed: bool) -> None:
        v = prop.value
        if not isinstance(v, ast.ListValue):
            return
        for item in v.items:
            cap = _word(item)
            if cap is None:
                continue
            if not _CAPABILITY.match(cap):
                self.sink.add("C081", item.span, f"malformed capability '{cap}' in {owner}",
                              "a capability is a lowercase domain or domain.action, e.g. board.read")
            elif cap not in KNOWN_CAPABILITIES:
                self.sink.add("C080", item.span, f"unknown capability '{cap}' in {owner}",
                              suggest(cap, KNOWN_CAPABILITIES))
            elif sandboxed and cap.startswith("board"):
                self.sink.add("C082", item.span, f"{owner} grants '{cap}' while the workflow sandbox is active",
                              "the board is a host service; a sandboxed run may not reach it")

    def cursor_uses(self, prop: ast.Property, owner: str) -> None:
        if not isinstance(prop.value, ast.Block):
            return
        for p in prop.value.properties:
            if p.name == "enabled":
                continue
            d = self.cursors.get(p.name)
            if d is None:
                self.sink.add("C083", p.span, f"{owner} sets unknown cursor '{p.name}'",
                              suggest(p.name, tuple(self.cursors)) if self.cursors else "declare it with 'cursor NAME:'")
                continue
            self.cursor_value(p, d, owner)

    def cursor_value(self, p: ast.Property, d: ast.ExtensionDecl, owner: str) -> None:
        v = p.value
        if isinstance(v, ast.Literal) and isinstance(v.value, str) and "${" in v.value:
            return  # resolved at run time
        num = _number(v)
        if num is None and isinstance(v, ast.Literal) and isinstance(v.value, str):
            try:
                num = float(v.value)
            except ValueError:
                num = None
        values = _get(d.body, "values")
        if num is not None:
            if not 0 <= num <= 1:
                self.sink.add("C084", v.span, f"cursor '{p.name}' of {owner} is {num:g}; a number must lie in [0, 1]")
            return
        names = tuple(x.name for x in _props(values.value)) if values is not None else ()
        word = _word(v)
        if word is None or word not in names:
            self.sink.add("C084", v.span, f"invalid value {word or kind_of(v)!r} for cursor '{p.name}' of {owner}",
                          ("expected a number in [0, 1] or one of: " + ", ".join(names)) if names
                          else "expected a number in [0, 1]")


def _node_backend(nd: ast.NodeDecl, wf: ast.WorkflowDecl | None) -> str | None:
    for src in (nd.properties, wf.properties if wf else ()):
        for p in src:
            if p.name in ("backend", "default_backend"):
                return _word(p.value)
    return None


def check_blocks(decls: Iterable[ast.Decl], sink: Sink) -> None:
    decls = list(decls)
    c = _Blocks(sink)
    ext = [d for d in decls if isinstance(d, ast.ExtensionDecl)]
    c.mcp_servers([d for d in ext if d.keyword == "mcp_server"])
    c.cursor_decls([d for d in ext if d.keyword == "cursor"])
    wf = next((d for d in decls if isinstance(d, ast.WorkflowDecl)), None)
    sandboxed = False
    image: str | None = None
    budget_tokens: float | None = None
    if wf is not None:
        owner = f"workflow '{wf.name}'"
        for p in wf.properties:
            if p.name == "sandbox":
                sandboxed = c.sandbox(p, owner)
                img = _get(p.value, "image")
                image = _word(img.value) if img is not None else None
            elif p.name == "compaction":
                c.compaction(p, owner)
            elif p.name == "mcp":
                c.mcp(p, owner)
            elif p.name == "budget":
                mt = _get(p.value, "max_tokens")
                budget_tokens = _number(mt.value) if mt is not None else None
        for p in wf.properties:
            if p.name == "capabilities":
                c.capabilities(p, owner, False)  # C082 is about a node granting board access
    for nd in (d for d in decls if isinstance(d, ast.NodeDecl)):
        owner = f"{nd.kind} '{nd.name}'"
        for p in nd.properties:
            if p.name == "compaction":
                c.compaction(p, owner)
            elif p.name == "memory":
                c.memory(p, owner, _node_backend(nd, wf))
            elif p.name == "mcp":
                c.mcp(p, owner)
            elif p.name == "sandbox":
                c.sandbox(p, owner)
            elif p.name == "capabilities":
                c.capabilities(p, owner, sandboxed)
            elif p.name == "cursors":
                c.cursor_uses(p, owner)
            elif p.name == "backend" and _word(p.value) == "codex":
                sink.add("C030", p.value.span, f"{owner} uses backend codex, which is discouraged",
                         "prefer claw or claude_code")
            elif p.name == "max_tokens" and budget_tokens is not None:
                n = _number(p.value)
                if n is not None and n > budget_tokens:
                    sink.add("C037", p.value.span, f"max_tokens of {owner} ({n:g}) is above the workflow budget "
                             f"({budget_tokens:g})", "the budget stops the run first; lower one of them")
    if sandboxed and image is not None and not any(b in image for b in BROWSER_IMAGES):
        for x in ext:
            if x.keyword == "mcp_server" and _mentions_playwright(x):
                sink.add("C060", x.span, f"mcp_server '{x.name}' runs Playwright, but the workflow sandbox image "
                         f"'{image}' has no browser", "use a sandbox-browser or sandbox-full-browser image")
    for decl in decls:
        if isinstance(decl, ast.AttachmentsDecl):
            for a in decl.attachments:
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
