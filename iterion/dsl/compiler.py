"""Compiler: the declarations of a unit -> ``iterion.ir.Workflow``, plus where every template came from.

This module resolves names and types (schemas, prompts, vars, presets, attachments, node
properties, edges, loops, budget). Graph-level rules and template/expression references are
checked by ``iterion.dsl.validate`` over what this produces. Prompts are resolved to text
(includes inlined; ``${ENV}`` kept as written, expanded at run time); ``{{...}}`` stays for the engine.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from gitrefs.ids import InvalidIdError, validate_id
from iterion.backends.choice import CLAW_CREDENTIALS, Choice, detect_backend
from iterion.dsl import ast
from iterion.dsl.blocks import BlockChecker, check_unit
from iterion.dsl.diagnostics import Severity, Sink
from iterion.dsl.grammar import (
    ATTACHMENT_KINDS,
    AWAIT_MODES,
    BLOCK_EXTENSIONS,
    BUDGET_PROPERTIES,
    INTERACTIONS,
    LANGUAGE_INTERPRETERS,
    LANGUAGES,
    LLM_ROUTER_ONLY,
    REASONING_EFFORTS,
    ROUTER_MODES,
    SESSIONS,
    TERMINAL_NAMES,
    TYPES,
    VAR_TYPES,
    WORKFLOW_EXTENSIONS,
    WORKTREE_MODES,
    suggest,
)
from iterion.dsl.located import Located
from iterion.dsl.sources import display
from iterion.dsl.values import kind_of, parse_duration, preset_value_matches, to_py, type_matches
from iterion.envsubst import RUN_START_NAMES, unset_plain_refs
from iterion.failure_codes import reserved_failure_codes
from iterion.ir import (
    Attachment,
    AwaitMode,
    Budget,
    Condition,
    ConditionKind,
    Edge,
    FieldType,
    Loop,
    Node,
    NodeKind,
    RouterMode,
    Schema,
    SchemaField,
    Span,
    Var,
    Workflow,
)
from iterion.templates import TemplateSyntaxError, expand_includes

# bash builtins a one-word command may name without a program on PATH (it runs as bash -c)
_SHELL_BUILTINS = frozenset({":", ".", "true", "false", "exit", "return", "set", "shopt", "cd", "pwd", "echo",
                             "printf", "wait", "times", "trap", "ulimit", "umask", "hash", "type", "jobs",
                             "history", "help", "dirs", "popd", "pushd", "logout", "suspend", "caller", "builtin",
                             "command", "enable", "exec", "export", "readonly", "shift", "source", "test", "alias",
                             "unalias", "unset", "declare", "local", "let", "read", "eval", "kill", "bg", "fg"})
_UPPER_SNAKE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")


@dataclass
class Sources:
    """Where each template/expression of the compiled workflow came from (for the validator)."""

    node_templates: dict[str, list[tuple[str, Located]]] = field(default_factory=dict)  # (what, text)
    node_exprs: dict[str, list[tuple[str, Located]]] = field(default_factory=dict)  # (field, expr)
    edge_templates: dict[int, list[tuple[str, Located]]] = field(default_factory=dict)
    edge_exprs: dict[int, Located] = field(default_factory=dict)
    prompts: dict[str, list[Located]] = field(default_factory=dict)  # every prompt, used or not
    # edges out of a terminal (C112): never taken, so not in the workflow, but a cycle through
    # one is still a cycle (C019, as the original finds it)
    terminal_edges: list[Edge] = field(default_factory=list)


@dataclass
class Compiled:
    workflow: Workflow | None  # None only when there is no usable workflow declaration
    sources: Sources


CREDENTIALS_HINT = ", ".join(f"${v}" for v in CLAW_CREDENTIALS)


class Compiler:
    def __init__(self, decls: list[ast.Decl], sink: Sink, *, env: Mapping[str, str],
                 read: Callable[[Path], str], main_file: str) -> None:
        self.decls = decls
        self.sink = sink
        self.env = env
        self.read = read
        self.main_file = main_file
        self.sources = Sources()
        self.schemas: dict[str, Schema] = {}
        self.prompt_decls: dict[str, ast.PromptDecl] = {}
        self.prompt_cache: dict[str, tuple[str, list[Located]]] = {}
        self.vars: dict[str, Var] = {}
        self.default_backend: str | None = None
        self.blocks = BlockChecker(sink)
        # (command, span, owner, node has sandbox:) of tool commands checked after the workflow
        self.one_word_commands: list[tuple[str, Span, str, bool]] = []
        # ITERION_DEFAULT_SUPERVISOR_MODEL: the model of an agent, judge or llm router without one
        self.supervisor_model = env.get("ITERION_DEFAULT_SUPERVISOR_MODEL") or None

    @cached_property
    def detected_backend(self) -> Choice | None:
        """A backend this host can use unasked (a credential, the claude CLI): C018's other
        exception (docs/language.md §2.4), by the detection the run-time choice uses; looked up
        only when a node needs it."""
        return detect_backend(self.env)

    # --- small helpers ------------------------------------------------------------------------

    def err(self, code: str, span: Span, message: str, hint: str | None = None) -> None:
        self.sink.add(code, span, message, hint)

    def each_once(self, props: Iterable[ast.Property], owner: str, noun: str = "property ") -> Iterator[ast.Property]:
        """``props`` without repeats: a property set twice is C105 (a warning) and the last value
        wins (docs/language.md 2.1)."""
        items = list(props)
        last = {p.name: i for i, p in enumerate(items)}
        seen: set[str] = set()
        for i, p in enumerate(items):
            if p.name in seen:
                self.err("C105", p.span, f"{noun}'{p.name}' is set twice in {owner}; the last value wins")
            seen.add(p.name)
            if last[p.name] == i:
                yield p

    def env_subst(self, text: str, loc: Located | None, warn: bool = True,
                  provided: frozenset[str] = frozenset()) -> str:
        """``text`` as written: the compiler never expands ``${...}`` (docs/language.md 1.7; the run does,
        through ``iterion.envsubst``). Only warns (C110) for a ``${NAME}`` without default whose
        variable is unset in the validation environment and not ``provided`` by the run."""
        if warn and loc is not None and "${" in text:
            for offset, name in unset_plain_refs(text, self.env):
                if name in provided:
                    continue
                self.sink.add("C110", loc.span_at(offset), f"environment variable {name} is not set",
                              f"export {name}=... before running, or give a default: ${{{name}:-value}}")
        return text

    def string(self, prop: ast.Property, owner: str, *, idents: bool = False) -> tuple[str, Located] | None:
        """A string property (env substituted) and where its text sits; idents allowed when asked."""
        v = prop.value
        if isinstance(v, ast.Literal) and isinstance(v.value, str):
            loc = Located(v.value, Span(v.span.file, v.span.line, v.span.column + 1))
            return self.env_subst(v.value, loc), loc
        if isinstance(v, ast.RawText):
            loc = Located(v.text, v.span, v.indent)
            return self.env_subst(v.text, loc), loc
        if idents and isinstance(v, ast.Ident):
            return v.name, Located(v.name, v.span)
        self.err("C100", v.span, f"'{prop.name}' of {owner} must be a quoted string, not {kind_of(v)}",
                 f'write {prop.name}: "..."')
        return None

    def choice(self, prop: ast.Property, owner: str, choices: tuple[str, ...], code: str = "C103",
               quoted_ok: bool = False) -> str | None:
        v = prop.value
        if isinstance(v, ast.Literal) and isinstance(v.value, str) and not quoted_ok:
            # a name is needed, not a string (docs/language.md §7: a wrong token is a syntax error); only
            # reasoning_effort may be quoted
            self.err("P008", v.span, f"'{prop.name}' of {owner} takes a name, not a quoted string",
                     f"write {prop.name}: {v.value}" if v.value.isidentifier() else
                     "expected one of: " + ", ".join(choices))
            return None
        word = v.name if isinstance(v, ast.Ident) else v.value if isinstance(v, ast.Literal) else None
        if isinstance(word, str) and word in choices:
            return word
        shown = word if isinstance(word, str) else kind_of(v)
        self.err(code, v.span, f"invalid {prop.name} {shown!r} in {owner}", "expected one of: " + ", ".join(choices))
        return None

    def integer(self, prop: ast.Property, owner: str, minimum: int = 1) -> int | None:
        v = prop.value
        if isinstance(v, ast.Literal) and type(v.value) is int:
            if v.value < minimum:
                self.err("C103", v.span, f"'{prop.name}' of {owner} must be at least {minimum}, got {v.value}")
                return None
            return v.value
        self.err("C100", v.span, f"'{prop.name}' of {owner} must be an integer, not {kind_of(v)}")
        return None

    def boolean(self, prop: ast.Property, owner: str) -> bool | None:
        v = prop.value
        if isinstance(v, ast.Literal) and isinstance(v.value, bool):
            return v.value
        self.err("C100", v.span, f"'{prop.name}' of {owner} must be true or false, not {kind_of(v)}")
        return None

    def str_list(self, prop: ast.Property, owner: str) -> tuple[str, ...] | None:
        v = prop.value
        if isinstance(v, ast.ListValue):
            out: list[str] = []
            for item in v.items:
                if isinstance(item, ast.Ident):
                    out.append(item.name)
                elif isinstance(item, ast.Literal) and isinstance(item.value, str):
                    out.append(self.env_subst(item.value, Located(item.value, item.span)))
                else:
                    self.err("C100", item.span, f"'{prop.name}' of {owner} lists names or strings, not {kind_of(item)}")
                    return None
            return tuple(out)
        self.err("C100", v.span, f"'{prop.name}' of {owner} must be a list like [a, b], not {kind_of(v)}")
        return None

    def schema_ref(self, prop: ast.Property, owner: str) -> Schema | None:
        v = prop.value
        if isinstance(v, ast.Literal) and isinstance(v.value, str):  # a string where a name is needed
            self.err("P008", v.span, f"'{prop.name}' of {owner} takes a schema name, not a quoted string",
                     f"write {prop.name}: {v.value}" if v.value.isidentifier() else None)
            return None
        name = v.name if isinstance(v, ast.Ident) else None
        if not isinstance(name, str):
            self.err("C100", v.span, f"'{prop.name}' of {owner} must name a schema, not {kind_of(v)}")
            return None
        schema = self.schemas.get(name)
        if schema is None:
            self.err("C002", v.span, f"unknown schema '{name}' in '{prop.name}' of {owner}",
                     suggest(name, tuple(self.schemas)) if self.schemas else "declare it with 'schema NAME:'")
        return schema

    # --- prompts ------------------------------------------------------------------------------

    def prompt(self, prop: ast.Property, owner: str) -> tuple[str, str | None, list[Located]] | None:
        """(resolved text, prompt name or None for inline text, sources) of a prompt property."""
        v = prop.value
        if isinstance(v, ast.Ident):
            if v.name not in self.prompt_decls:
                self.err("C003", v.span, f"unknown prompt '{v.name}' in '{prop.name}' of {owner}",
                         suggest(v.name, tuple(self.prompt_decls)) if self.prompt_decls
                         else "declare it with 'prompt NAME:' or add prompts/NAME.md to the bundle")
                return None
            text, locs = self.resolve_prompt(self.prompt_decls[v.name])
            return text, v.name, locs
        got = self.string(prop, owner)
        if got is None:
            return None
        text, loc = got
        return text, None, [loc]

    def resolve_prompt(self, decl: ast.PromptDecl) -> tuple[str, list[Located]]:
        if decl.name in self.prompt_cache:
            return self.prompt_cache[decl.name]
        body = decl.body
        loc = Located(body.text, body.span, body.indent)
        locs = [loc]
        text = body.text
        if "{{" in text and "include" in text:  # no include: nothing to expand (a malformed marker is C004 below)
            base = Path(body.span.file).parent
            try:
                text, files = expand_includes(text, base, read=self.read)
                for f in files:
                    try:
                        locs.append(Located(self.read(f), Span(display(f), 1, 1), 0))
                    except (OSError, UnicodeDecodeError):
                        pass
            except TemplateSyntaxError as exc:
                span = loc.span_at(exc.offset)
                if exc.path:
                    try:
                        span = Located(self.read(Path(exc.path)), Span(display(Path(exc.path)), 1, 1)).span_at(exc.offset)
                    except (OSError, UnicodeDecodeError):
                        span = Span(display(Path(exc.path)), 1, 1)
                if exc.include or "include cycle" in exc.message or "cannot read" in exc.message:
                    self.err("L003", span, f"in prompt '{decl.name}': {exc.message}",
                             "include paths are relative to the file that holds the {{include}}")
                elif exc.path:  # malformed marker inside an included file
                    self.err("C004", span, exc.message,
                             "a template reference looks like {{vars.NAME}} or {{outputs.NODE.FIELD}}")
                # else: malformed in the prompt body itself, reported (once) by the reference check
        self.prompt_cache[decl.name] = (text, locs)
        self.sources.prompts[decl.name] = locs
        return text, locs

    # --- declarations -------------------------------------------------------------------------

    def run(self) -> Compiled:
        d = self.decls
        schemas = [x for x in d if isinstance(x, ast.SchemaDecl)]
        prompts = [x for x in d if isinstance(x, ast.PromptDecl)]
        nodes = [x for x in d if isinstance(x, ast.NodeDecl)]
        workflows = [x for x in d if isinstance(x, ast.WorkflowDecl)]
        for s in schemas:
            self.schema(s)
        for pd in prompts:
            if pd.name in self.prompt_decls:
                first = self.prompt_decls[pd.name].span
                self.err("C041", pd.span, f"prompt '{pd.name}' is declared twice (first at {first})",
                         "rename one of them")
                continue
            self.prompt_decls[pd.name] = pd
        if not workflows:
            self.err("C006", Span(self.main_file, 1, 1), "no workflow declared",
                     "add 'workflow NAME:' with an 'entry:' and edges")
        for extra in workflows[1:]:
            self.err("C007", extra.span, f"several workflows: '{extra.name}' is the second (first '{workflows[0].name}' at {workflows[0].span})",
                     "a unit holds exactly one workflow; move the other to its own file")
        wf_decl = workflows[0] if workflows else None
        for v in [x for x in d if isinstance(x, ast.VarsDecl)]:
            self.var_block(v.vars)
        if wf_decl:
            self.var_block(wf_decl.vars)  # workflow vars override same-named file vars (no C113)
            p = wf_decl.prop("default_backend")
            if p is not None:
                got = self.string(p, f"workflow '{wf_decl.name}'", idents=True)
                self.default_backend = got[0] if got else None
        wf = Workflow(name=wf_decl.name if wf_decl else "", entry="", nodes={}, edges=[],
                      span=wf_decl.span if wf_decl else None)
        wf.vars = self.vars
        wf.schemas = self.schemas
        wf.default_backend = self.default_backend
        for a in [x for x in d if isinstance(x, ast.AttachmentsDecl)]:
            for att in a.attachments:
                self.attachment(att, wf)
        for att in (wf_decl.attachments if wf_decl else ()):
            self.attachment(att, wf)  # workflow-level attachments: merged, names unique across both (C050)
        for x in d:  # a bundle's presets/*.md arrive as bare PresetDecls
            for preset in x.presets if isinstance(x, ast.PresetsDecl) else (x,) if isinstance(x, ast.PresetDecl) else ():
                self.preset(preset, wf)
        for nd in nodes:
            self.node(nd, wf)
        for name, pdecl in self.prompt_decls.items():
            wf.prompts[name] = self.resolve_prompt(pdecl)[0]
        for ext in [x for x in d if isinstance(x, ast.ExtensionDecl)]:
            val = to_py(ext.body)
            if ext.keyword == "mcp_server" and ext.name is not None:
                self.blocks.mcp_server(ext.name, ext.body, ext.span)
            elif ext.keyword == "cursor" and ext.name is not None:
                self.blocks.cursor(ext.name, ext.body, ext.span)
            elif ext.name is None:
                val = self.blocks.node_block(ast.Property(ext.keyword, ext.body, ext.span), "the file")
            if ext.name is None:
                wf.extra[ext.keyword] = val
            else:
                wf.extra.setdefault(ext.keyword, {}).setdefault(ext.name, val)  # a duplicate is C024/C086
        if wf_decl is None:
            return Compiled(None, self.sources)
        self.workflow(wf_decl, wf)
        for command, span, owner, sandboxed in self.one_word_commands:
            self.unknown_builtin(command, span, owner, sandboxed or bool(wf.extra.get("sandbox")))
        check_unit(wf, d, nodes, self.sink)
        return Compiled(wf, self.sources)

    def schema(self, s: ast.SchemaDecl) -> None:
        if s.name in self.schemas:
            self.err("C041", s.span, f"schema '{s.name}' is declared twice", "rename one of them")
            return
        fields: dict[str, SchemaField] = {}
        for f in s.fields:
            if f.name in fields:
                # the original keeps the last (docs/language.md §2.1 "a property written twice keeps
                # the last value"): a warning, and the field takes the last place
                self.err("C105", f.span, f"field '{f.name}' is declared twice in schema '{s.name}'; the last wins",
                         "remove one of them")
                del fields[f.name]
            if f.type.name not in TYPES:
                self.err("C102", f.type.span, f"unknown type '{f.type.name}' for field '{f.name}' of schema '{s.name}'",
                         suggest(f.type.name, TYPES))
                continue
            enum: tuple[str, ...] | None = None
            if f.enum is not None:
                if f.type.name != "string":
                    self.err("C101", f.enum.span, f"enum on field '{f.name}' of type {f.type.name}: only string fields take an enum")
                values: list[str] = []
                for lit in f.enum.values:
                    if not isinstance(lit.value, str):
                        self.err("C101", lit.span, f"enum value {lit.value!r} of field '{f.name}' is not a string",
                                 'quote enum values: [enum: "a", "b"]')
                    elif lit.value in values:
                        self.err("C101", lit.span, f"enum value {lit.value!r} appears twice in field '{f.name}'")
                    else:
                        values.append(lit.value)
                enum = tuple(values)
            fields[f.name] = SchemaField(f.name, FieldType(f.type.name), enum)
        self.schemas[s.name] = Schema(s.name, tuple(fields.values()))

    def var_block(self, block: tuple[ast.VarDecl, ...]) -> None:
        """One ``vars:`` block: a name twice in it is C113 (W) and the last wins; a name already
        declared by an earlier block is overridden (type and default)."""
        seen: set[str] = set()
        for v in block:
            if v.name in seen:
                self.err("C113", v.span, f"var '{v.name}' is declared twice in one vars: block; the last wins",
                         "rename or remove one of them")
            seen.add(v.name)
            self.vars.pop(v.name, None)
            self.var(v)

    def var(self, v: ast.VarDecl) -> None:
        if v.type.name not in VAR_TYPES:
            self.err("C102", v.type.span, f"unknown type '{v.type.name}' for var '{v.name}'", suggest(v.type.name, VAR_TYPES))
            return
        default: Any = None
        if v.default is not None:
            default = to_py(v.default)
            if isinstance(default, str) and isinstance(v.default, ast.Literal):
                default = self.env_subst(default, Located(default, Span(v.default.span.file, v.default.span.line,
                                                                         v.default.span.column + 1)),
                                         provided=RUN_START_NAMES)
            written_as_text = isinstance(default, str) and v.type.name in ("json", "string[]")
            if not type_matches(default, v.type.name) and not written_as_text:
                # not checked by the original (docs/language.md 2.2): a warning, and the default is kept
                self.sink.add("C100", v.default.span,
                              f"default of var '{v.name}' is {kind_of(v.default)}, but its type is {v.type.name}",
                              f"give a {v.type.name} default, or change the type", Severity.WARNING)
            if v.type.name == "float" and isinstance(default, int):
                default = float(default)
        self.vars[v.name] = Var(v.name, FieldType(v.type.name), default, v.default is not None)

    def attachment(self, a: ast.AttachmentDecl, wf: Workflow) -> None:
        if a.name in wf.attachments:
            self.err("C050", a.span, f"attachment '{a.name}' is declared twice", "rename one of them")
            return
        if a.name in self.vars:
            self.err("C051", a.span, f"attachment '{a.name}' has the name of a var",
                     "attachments and vars share the launch namespace; rename one")
        owner = f"attachment '{a.name}'"
        kind = a.kind.name
        if kind not in ATTACHMENT_KINDS:
            self.err("C103", a.kind.span, f"invalid kind {kind!r} for {owner}", "expected file or image")
            return
        desc: str | None = None
        mime: tuple[str, ...] = ()
        required = False
        for p in a.properties:
            if p.name == "description":
                got = self.string(p, owner)
                desc = got[0] if got else None
            elif p.name == "accept_mime":
                mime = self.str_list(p, owner) or ()
            elif p.name == "required":
                required = bool(self.boolean(p, owner))
        wf.attachments[a.name] = Attachment(a.name, kind, desc, mime, required)

    def preset(self, p: ast.PresetDecl, wf: Workflow) -> None:
        if p.name in wf.presets:
            self.err("C072", p.span, f"preset '{p.name}' is declared twice", "rename one of them")
            return
        values: dict[str, Any] = {}
        for prop in p.values:
            var = self.vars.get(prop.name)
            if var is None:
                self.err("C070", prop.span, f"preset '{p.name}' sets '{prop.name}', which is not a declared var",
                         suggest(prop.name, tuple(self.vars)) if self.vars else "declare it under vars:")
                continue
            value = to_py(prop.value)
            if not preset_value_matches(value, var.type.value):
                self.err("C071", prop.value.span,
                         f"preset '{p.name}' gives var '{prop.name}' {kind_of(prop.value)}, but its type is {var.type.value}")
                continue
            values[prop.name] = float(value) if var.type is FieldType.FLOAT else value
        wf.presets[p.name] = values

    # --- nodes --------------------------------------------------------------------------------

    def node(self, nd: ast.NodeDecl, wf: Workflow) -> None:
        owner = f"{nd.kind} '{nd.name}'"
        if nd.name in TERMINAL_NAMES:
            self.err("C042", nd.name_span, f"a node cannot be named '{nd.name}': it is a built-in terminal",
                     "pick another name; edges reach the terminals as 'done' and 'fail'")
            return
        if nd.name in wf.nodes:
            first = wf.nodes[nd.name]
            self.err("C041", nd.name_span, f"node '{nd.name}' is declared twice (first at {first.span})",
                     "rename one of them")
            return
        try:  # node ids become ref components (refs/iterion/runs/<run>/nodes/<node>/...)
            validate_id(nd.name, "node name")
        except InvalidIdError as exc:
            self.err("C103", nd.name_span, str(exc))
            return
        node = Node(id=nd.name, kind=NodeKind(nd.kind), span=nd.span)
        templates: list[tuple[str, Located]] = []
        for p in self.each_once(nd.properties, owner):
            self.node_property(node, nd, p, owner, templates)
        self.finish_node(node, nd, owner, wf)
        wf.nodes[nd.name] = node
        self.sources.node_templates[nd.name] = templates

    def node_property(self, node: Node, nd: ast.NodeDecl, p: ast.Property, owner: str,
                      templates: list[tuple[str, Located]]) -> None:
        name = p.name
        if name in BLOCK_EXTENSIONS:
            node.extra[name] = self.blocks.node_block(p, owner)
        elif name == "cursors":
            node.cursors = self.blocks.node_block(p, owner) if isinstance(p.value, ast.Block) else {}
            if not isinstance(p.value, ast.Block):
                self.err("C100", p.value.span, f"'cursors' of {owner} must be an indented block of 'CURSOR: value' lines")
        elif name in ("provider", "interaction_model"):  # provider: the claw backend's wire format
            # (anthropic, openai, auto, ...; docs/language.md 2.4); its one home is Node.provider
            v = p.value  # kept as written: `${...}` expands when the node runs (docs/language.md §1.7)
            if isinstance(v, ast.Ident) or (isinstance(v, ast.Literal) and isinstance(v.value, str)):
                if isinstance(v, ast.Literal) and isinstance(v.value, str):  # C110, as for model
                    self.env_subst(v.value, Located(v.value, Span(v.span.file, v.span.line, v.span.column + 1)))
                setattr(node, name, to_py(v))
            else:
                self.err("C100", v.span, f"'{name}' of {owner} must be a quoted string, not {kind_of(v)}")
        elif name == "interaction_prompt":
            v = p.value  # a prompt name; an unknown one is not reported (as observed, docs/language.md §2.4)
            if isinstance(v, ast.Ident):
                node.interaction_prompt_ref = v.name
                if v.name in self.prompt_decls:
                    text, locs = self.resolve_prompt(self.prompt_decls[v.name])
                    node.interaction_prompt = text
                    templates.extend((name, loc) for loc in locs)
            else:
                got = self.string(p, owner)
                if got:
                    node.interaction_prompt = got[0]
                    templates.append((name, got[1]))
        elif name in ("input", "output"):
            setattr(node, f"{name}_schema", self.schema_ref(p, owner))
        elif name in ("system", "user", "instructions"):
            prompt = self.prompt(p, owner)
            if prompt:
                text, ref, locs = prompt
                setattr(node, name, text)
                setattr(node, f"{name}_ref", ref)
                templates.extend((name, loc) for loc in locs)
        elif name in ("model", "backend", "publish"):
            got = self.string(p, owner, idents=name != "model")
            if got:
                setattr(node, name, got[0])
        elif name in ("command", "script", "message"):
            got = self.string(p, owner)
            if got:
                setattr(node, name, got[0])
                templates.append((name, got[1]))
        elif name == "session":
            node.session = self.choice(p, owner, SESSIONS) or node.session
        elif name == "interaction":
            node.interaction = self.choice(p, owner, INTERACTIONS)
        elif name == "await":
            mode = self.choice(p, owner, AWAIT_MODES)
            node.await_mode = AwaitMode(mode) if mode else None
        elif name == "reasoning_effort":
            v = p.value
            if isinstance(v, ast.Literal) and isinstance(v.value, str) and "$" in v.value:
                node.reasoning_effort = v.value  # expanded when the node runs; not checked (docs/language.md 1.7)
            else:
                # "quoted values without `$` checked by C027" (docs/language.md §2); an unquoted one is the
                # original's E020, an invalid enumerated value (C103, docs/language.md §7)
                quoted = isinstance(v, ast.Literal) and isinstance(v.value, str)
                node.reasoning_effort = self.choice(p, owner, REASONING_EFFORTS, code="C027" if quoted else "C103",
                                                    quoted_ok=True)
        elif name == "tools":
            if self.blocks.ref_list(p, owner):
                node.tools = self.str_list(p, owner) or ()
        elif name in ("tool_max_steps", "max_tokens", "min_answers"):
            setattr(node, name, self.integer(p, owner))
        elif name in ("readonly", "multi", "resumable"):
            val = self.boolean(p, owner)
            setattr(node, name, bool(val))
        elif name == "mode":
            mode = self.choice(p, owner, ROUTER_MODES)
            node.mode = RouterMode(mode) if mode else None
        elif name == "language":
            lang = to_py(p.value) if isinstance(p.value, (ast.Ident, ast.Literal)) else None
            if not isinstance(lang, str) or lang not in LANGUAGES:
                self.err("C004", p.value.span, f"unknown script language {lang!r} in {owner}",
                         "expected one of: " + ", ".join(LANGUAGES))
            else:
                node.language = {"python3": "python"}.get(LANGUAGE_INTERPRETERS[lang], LANGUAGE_INTERPRETERS[lang])
        elif name == "expr":
            self.compute_exprs(node, nd, p, owner)
        elif name == "code":
            self.fail_code(node, p, owner)
        elif name == "source":
            self.subbot_source(node, p, owner)
        elif name == "with":
            self.subbot_with(node, p, owner, templates)

    def subbot_source(self, node: Node, p: ast.Property, owner: str) -> None:
        """``source: "path/child.bot"`` (or ``.botz``), resolved like an import: relative to the
        declaring file, recorded relative to the main file's directory (the engine resolves it
        against the run's recorded main file)."""
        got = self.string(p, owner)
        if not got:
            return
        text = got[0]
        if not text.endswith((".bot", ".botz")) or os.path.isabs(text):
            self.err("C116", p.value.span, f"source of {owner} must be a relative path to a .bot or .botz file, "
                     f"got {text!r}", 'e.g. source: "bots/child.bot"')
            return
        node.source = text
        target = os.path.normpath(os.path.join(os.path.dirname(p.span.file), text))
        node.source_path = os.path.relpath(target, os.path.dirname(self.main_file) or ".")

    def subbot_with(self, node: Node, p: ast.Property, owner: str, templates: list[tuple[str, Located]]) -> None:
        """``with:`` the child's vars: a block of ``VAR: "template"`` lines or a ``{ VAR: ... }``
        map; a non-string value is passed as its JSON text (coerced to the var's type)."""
        v = p.value
        entries: list[tuple[str, ast.Value, Span]]
        if isinstance(v, ast.Block):
            entries = [(q.name, q.value, q.span) for q in v.properties]
        elif isinstance(v, ast.MapValue):
            entries = [(e.key, e.value, e.span) for e in v.entries]
        else:
            self.err("C100", v.span, f"'with' of {owner} must be a block of 'VAR: \"template\"' lines or a map")
            return
        pairs: list[tuple[str, str]] = []
        for key, val, _span in entries:
            if isinstance(val, ast.Literal) and isinstance(val.value, str):
                pairs.append((key, val.value))
                templates.append((f"with.{key}", Located(val.value, Span(val.span.file, val.span.line,
                                                                          val.span.column + 1))))
            elif isinstance(val, (ast.Literal, ast.ListValue, ast.MapValue)):
                pairs.append((key, json.dumps(to_py(val))))
            else:
                self.err("C100", val.span, f"'with.{key}' of {owner} must be a quoted template or a literal")
        node.subbot_with = tuple(pairs)

    def compute_exprs(self, node: Node, nd: ast.NodeDecl, p: ast.Property, owner: str) -> None:
        if not isinstance(p.value, ast.Block):
            self.err("C100", p.value.span, f"'expr' of {owner} must be a block of 'field: \"expression\"' lines")
            return
        exprs: list[tuple[str, Located]] = []
        for fp in p.value.properties:
            v = fp.value
            if not (isinstance(v, ast.Literal) and isinstance(v.value, str)):
                self.err("C100", v.span, f"expression for '{fp.name}' in {owner} must be a quoted string",
                         f'write {fp.name}: "vars.x + 1"')
                continue
            if fp.name in node.exprs:
                self.err("C105", fp.span, f"field '{fp.name}' has two expressions in {owner}; the last wins")
                exprs = [x for x in exprs if x[0] != fp.name]
                del node.exprs[fp.name]
            node.exprs[fp.name] = v.value
            exprs.append((fp.name, Located(v.value, Span(v.span.file, v.span.line, v.span.column + 1))))
        self.sources.node_exprs[nd.name] = exprs

    def fail_code(self, node: Node, p: ast.Property, owner: str) -> None:
        v = p.value
        code = v.name if isinstance(v, ast.Ident) else v.value if isinstance(v, ast.Literal) else None
        if not isinstance(code, str) or not _UPPER_SNAKE.match(code):
            self.err("C103", v.span, f"failure code of {owner} must be UPPER_SNAKE, got {code!r}",
                     "for example: code: REVIEW_REJECTED")
            return
        if code in reserved_failure_codes():
            self.err("C248", v.span, f"{owner} uses code {code}, which is one of the engine's own failure codes",
                     "pick a bot-specific code (e.g. prefix it with your bot's name); engine codes drive auto-retry")
            return
        node.code = code

    def finish_node(self, node: Node, nd: ast.NodeDecl, owner: str, wf: Workflow) -> None:
        kind = nd.kind
        has = {p.name for p in nd.properties}
        # the default-supervisor-model fallback (docs/language.md §1.7): every agent, judge or llm
        # router without model: takes it, whatever its backend
        if kind in ("agent", "judge", "router") and "model" not in has and self.supervisor_model \
                and (kind != "router" or node.mode is RouterMode.LLM):
            node.model = self.supervisor_model
            has = has | {"model"}
        # any written backend: counts as given, "auto" and "${...}" included (their value is the run's
        # business, §1.7); missing both is accepted on a host with a detectable backend (§2.4)
        if kind in ("agent", "judge") and not ({"model", "backend"} & has) and not self.default_backend \
                and self.detected_backend is None:
            self.err("C018", nd.name_span, f"{owner} has neither model nor backend",
                     'add model: "..." or backend: NAME (or default_backend: in the workflow), '
                     f"or set ITERION_DEFAULT_SUPERVISOR_MODEL or a backend credential ({CREDENTIALS_HINT}, "
                     "or the claude CLI on PATH)")
        self.model_needed(node, nd, owner, has)
        if kind == "router":
            if "mode" not in has:
                node.mode = RouterMode.FAN_OUT_ALL  # the default when omitted (docs/language.md 2.5)
            if node.mode is not None and node.mode is not RouterMode.LLM:
                for prop in nd.properties:
                    if prop.name in LLM_ROUTER_ONLY:
                        self.err("C023", prop.span, f"'{prop.name}' is only valid on an llm router; {owner} is {node.mode.value}",
                                 "remove it, or use mode: llm")
        if kind == "tool":
            self.tool_shape(node, nd, owner, has)
            if "script" in has and "language" not in has:
                node.language = "sh"  # the default (docs/language.md §2.7)
        if kind == "compute":
            if not node.exprs and not any(p.name == "expr" and isinstance(p.value, ast.Block) and p.value.properties
                                          for p in nd.properties):
                self.err("C039", nd.name_span, f"{owner} has no expressions",
                         'add an expr: block mapping each output field to "expression"')
            if node.output_schema is not None:
                for fname, loc in self.sources.node_exprs.get(nd.name, []):
                    if node.output_schema.field(fname) is None:
                        self.err("C111", loc.origin, f"{owner} computes '{fname}', which is not a field of schema '{node.output_schema.name}'")
        if kind == "subbot" and "source" not in has:
            self.err("C116", nd.name_span, f"{owner} has no source:", 'add source: "path/child.bot"')
        if kind == "fail" and "code" not in has:
            self.err("C104", nd.name_span, f"{owner} has no code:", "add code: YOUR_FAILURE_CODE (UPPER_SNAKE)")

    def model_needed(self, node: Node, nd: ast.NodeDecl, owner: str, has: set[str]) -> None:
        """C018 beyond agents and judges (docs/language.md 7): an llm router without model or backend is a
        warning (a default model applies at run time); a human answered by a model
        (interaction llm or llm_or_human) needs a model and an output."""
        if nd.kind == "router" and node.mode is RouterMode.LLM and not ({"model", "backend"} & has) \
                and not self.default_backend:
            self.sink.add("C018", nd.name_span, f"{owner} is an llm router without model or backend",
                          'add model: "..."; until then a default model is used', Severity.WARNING)
        if nd.kind == "human" and node.interaction in ("llm", "llm_or_human"):
            missing = [k for k in ("model", "output") if k not in has and not (k == "model" and "interaction_model" in has)]
            if missing:
                self.err("C018", nd.name_span, f"{owner} is answered by a model (interaction {node.interaction}) "
                         f"but has no {' and no '.join(missing)}", "add model: \"...\" and output: SCHEMA")

    def tool_shape(self, node: Node, nd: ast.NodeDecl, owner: str, has: set[str]) -> None:
        """C004 (docs/language.md 2.7): exactly one of command:/script:; language: only with script:
        (absent: sh)."""
        if not ({"command", "script"} & has):
            self.err("C004", nd.name_span, f"{owner} needs command: or script:", 'e.g. command: "make test"')
        if {"command", "script"} <= has:
            self.err("C004", nd.name_span, f"{owner} has both command: and script:; keep exactly one")
        cmd = next((p for p in nd.properties if p.name == "command"), None)
        if cmd is not None and "script" not in has and isinstance(cmd.value, ast.Literal) \
                and isinstance(cmd.value.value, str):
            # checked once the workflow is compiled: a sandbox's image has its own programs
            self.one_word_commands.append((cmd.value.value, cmd.value.span, owner, "sandbox" in has))
        lang = next((p for p in nd.properties if p.name == "language"), None)
        if lang is not None and "script" not in has:
            self.err("C004", lang.span, f"{owner} has language: without script:",
                     "language: names the interpreter of a script:; a command: runs with bash")

    def unknown_builtin(self, command: str, span: Span, owner: str, sandboxed: bool) -> None:
        """C004 (docs/language.md, "Built-in tools"): a one-word command names a built-in tool or a
        program; one that is neither (not on PATH, not a shell builtin) is refused with a hint.
        Under a sandbox the program is looked for in its image at run time, not here."""
        import shutil

        from iterion.builtins.registry import NAMES, is_builtin, one_word

        word = one_word(command)
        if word is None or is_builtin(word) or sandboxed or word in _SHELL_BUILTINS or shutil.which(word):
            return
        self.err("C004", span, f"{owner}: command {word!r} is neither a built-in tool nor a program on PATH",
                 "built-in tools: " + ", ".join(NAMES) + "; or install the program, or give its path")

    # --- workflow -----------------------------------------------------------------------------

    def workflow(self, w: ast.WorkflowDecl, wf: Workflow) -> None:
        owner = f"workflow '{w.name}'"
        for p in self.each_once(w.properties, owner, noun=""):
            if p.name == "entry":
                v = p.value
                if not isinstance(v, ast.Ident):
                    self.err("C008", v.span, f"entry of {owner} must name a node, not {kind_of(v)}")
                elif v.name not in wf.nodes:
                    # a named fail node is a valid entry (the run ends failed, with a WARN when it
                    # is resumable: no guard precedes it); the built-in done/fail are not nodes
                    self.err("C008", v.span, f"entry '{v.name}' is not a declared node",
                             suggest(v.name, tuple(wf.nodes)) if wf.nodes else None)
                else:
                    wf.entry = v.name
            elif p.name == "budget":
                wf.budget = self.budget(p, owner)
            elif p.name == "worktree":
                # auto: a per-run worktree; none, absent or any other name: in place (as observed, §2.13)
                if isinstance(p.value, ast.Ident):
                    wf.worktree = p.value.name == "auto"
                else:
                    self.choice(p, owner, WORKTREE_MODES)  # a string or another kind: reported
            elif p.name == "interaction":
                wf.interaction = self.choice(p, owner, INTERACTIONS)
            elif p.name in BLOCK_EXTENSIONS:
                wf.extra[p.name] = self.blocks.node_block(p, owner)
            elif p.name == "push_checkpoints":  # extension: the remote workspace checkpoints go to
                got = self.string(p, owner, idents=True)
                if got is not None:
                    if not got[0].strip():
                        self.err("C103", p.value.span, f"push_checkpoints of {owner} names no remote",
                                 'write push_checkpoints: origin (a remote name, URL or path)')
                    else:
                        wf.push_checkpoints = got[0].strip()
            elif p.name == "push_every":
                wf.push_every = self.integer(p, owner) or 0
            elif p.name in WORKFLOW_EXTENSIONS:
                wf.extra[p.name] = to_py(p.value)
        if w.prop("entry") is None:
            self.err("C008", w.span, f"{owner} has no entry:", "add 'entry: FIRST_NODE'")
        self.edges(w, wf)

    def budget(self, p: ast.Property, owner: str) -> Budget:
        if not isinstance(p.value, ast.Block):
            self.err("C100", p.value.span, f"budget of {owner} must be a block of caps")
            return Budget()
        caps: dict[str, Any] = {}
        for bp in p.value.properties:
            v = bp.value
            where = f"budget of {owner}"
            if bp.name not in BUDGET_PROPERTIES:
                self.err("P007", bp.span, f"unknown property '{bp.name}' in {where}", suggest(bp.name, BUDGET_PROPERTIES))
            elif bp.name == "max_duration":
                text = v.value if isinstance(v, ast.Literal) else None
                secs = parse_duration(text) if isinstance(text, str) else (
                    float(text) if isinstance(text, (int, float)) and not isinstance(text, bool) else None)
                if secs is None and not isinstance(text, str):
                    self.err("C100", v.span, f"max_duration in {where} must be a quoted duration like \"30m\" or \"1h30m\"")
                elif secs is None or secs <= 0:
                    # "unreadable: no limit (as observed)" (docs/language.md §2): a C1xx fault the original
                    # accepts is only a warning (7)
                    self.sink.add("C103", v.span, f"max_duration {text!r} in {where} is not a duration, so the run "
                                  "has no time limit", 'write it like "30m" or "1h30m"', severity=Severity.WARNING)
                else:
                    caps["max_duration_s"] = secs
            elif bp.name == "max_cost_usd":
                num = v.value if isinstance(v, ast.Literal) else None
                if not isinstance(num, (int, float)) or isinstance(num, bool):
                    self.err("C100", v.span, f"max_cost_usd in {where} must be a number, not {kind_of(v)}")
                elif num < 0 or not math.isfinite(num):
                    self.err("C046", v.span, f"max_cost_usd in {where} must be a finite number >= 0, got {num}")
                else:
                    caps["max_cost_usd"] = float(num)
            else:
                val = self.integer(bp, where)
                if val is not None:
                    caps[bp.name] = val
        return Budget(**caps)

    def edges(self, w: ast.WorkflowDecl, wf: Workflow) -> None:
        loops: dict[str, tuple[int | str, Span]] = {}
        fail_nodes = {n for n, node in wf.nodes.items() if node.kind is NodeKind.FAIL}
        for e in w.edges:
            ok = True
            src, dst = e.src.name, e.dst.name
            if src in TERMINAL_NAMES or src in fail_nodes:
                self.err("C112", e.src.span, f"edge out of terminal '{src}': a run ends there",
                         "edges start at agent, judge, router, human, tool or compute nodes")
                ok = False
            elif src not in wf.nodes:
                self.err("C001", e.src.span, f"edge from undeclared node '{src}'", suggest(src, tuple(wf.nodes)))
                ok = False
            if dst not in TERMINAL_NAMES and dst not in wf.nodes:
                self.err("C001", e.dst.span, f"edge to undeclared node '{dst}'",
                         suggest(dst, (*wf.nodes, *TERMINAL_NAMES)))
                ok = False
            cond: Condition | None = None
            expr_loc: Located | None = None
            if e.when is not None:
                if e.when.kind == "expr":
                    assert e.when.expr is not None
                    lit = e.when.expr
                    expr_src = str(lit.value)
                    expr_loc = Located(expr_src, Span(lit.span.file, lit.span.line, lit.span.column + 1))
                    cond = Condition(ConditionKind.EXPR, expr=expr_src)
                else:
                    cond = Condition(ConditionKind(e.when.kind), field=e.when.field)
            loop_name, loop_max, loop_bound = None, None, None
            bound_loc: Located | None = None
            if e.loop is not None and isinstance(e.loop.max, str):
                # a template bound: resolved at run time, no C026 (docs/language.md §3.5)
                loop_name, loop_bound = e.loop.name, e.loop.max
                bound_loc = Located(e.loop.max, Span(e.loop.span.file, e.loop.span.line, e.loop.span.column))
                prev = loops.get(e.loop.name)
                if prev is not None and prev[0] != e.loop.max:
                    self.err("C005", e.loop.span, f"loop '{e.loop.name}' has bound {e.loop.max!r} here but {prev[0]!r} at {prev[1]}",
                             "one loop has one bound; use the same bound or another loop name")
                else:
                    loops.setdefault(e.loop.name, (e.loop.max, e.loop.span))
            elif e.loop is not None and isinstance(e.loop.max, int):
                loop_name, loop_max = e.loop.name, e.loop.max
                if e.loop.max < 1:
                    self.err("C026", e.loop.span, f"loop '{e.loop.name}' has bound {e.loop.max}; it must be at least 1")
                elif e.loop.name in loops and loops[e.loop.name][0] != e.loop.max:
                    first_max, first_span = loops[e.loop.name]
                    self.err("C005", e.loop.span, f"loop '{e.loop.name}' has bound {e.loop.max} here but {first_max} at {first_span}",
                             "one loop has one bound; use the same N or another loop name")
                else:
                    loops.setdefault(e.loop.name, (e.loop.max, e.loop.span))
            with_map: list[tuple[str, str]] = []
            templates: list[tuple[str, Located]] = []
            if bound_loc is not None:
                templates.append(("loop bound", bound_loc))
            if e.with_map is not None:
                last = {entry.key: entry for entry in e.with_map.entries}  # a key written twice: the last wins
                for entry in e.with_map.entries:
                    if last[entry.key] is not entry:
                        self.err("C105", last[entry.key].span, f"key '{entry.key}' is written twice in the with map "
                                 f"into '{dst}'; the last value wins", "remove one of them")
                        continue
                    v = entry.value
                    if isinstance(v, ast.Literal) and isinstance(v.value, str):
                        loc = Located(v.value, Span(v.span.file, v.span.line, v.span.column + 1))
                        templates.append((entry.key, loc))
                        with_map.append((entry.key, v.value))  # never env-expanded (docs/language.md 1.7)
                    else:
                        py = to_py(v)
                        with_map.append((entry.key, py if isinstance(py, str) else json.dumps(py, separators=(",", ":"))))
            if not ok:
                if (src in TERMINAL_NAMES or src in fail_nodes) and (dst in TERMINAL_NAMES or dst in wf.nodes):
                    self.sources.terminal_edges.append(Edge(-1, src, dst, e.span, cond, loop_name, loop_max,
                                                            loop_bound=loop_bound))
                continue
            edge_index = len(wf.edges)
            if expr_loc is not None:
                self.sources.edge_exprs[edge_index] = expr_loc
            self.sources.edge_templates[edge_index] = templates
            wf.edges.append(Edge(edge_index, src, dst, e.span, cond, loop_name, loop_max, loop_bound=loop_bound,
                                 with_map=tuple(with_map)))
        by_loop: dict[str, list[int]] = {}  # one pass: a scan per loop was quadratic in loops x edges
        for ed in wf.edges:
            if ed.loop is not None:
                by_loop.setdefault(ed.loop, []).append(ed.index)
        for name, (mx, _) in loops.items():
            indices = tuple(by_loop.get(name, ()))
            if isinstance(mx, str):
                wf.loops[name] = Loop(name, 0, indices, bound=mx)
            else:
                wf.loops[name] = Loop(name, mx, indices)
