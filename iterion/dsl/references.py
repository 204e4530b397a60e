"""References inside templates and expressions: do they name something, and can it have a value
by the time the consumer runs?

Parsing is ``iterion.templates`` / ``iterion.expr``'s job; this module only maps their
offsets to file:line:col (via ``Located``) and checks each reference against the workflow:
C004/C040 (syntax), C017, C029, C031-C036, C053, C054, C106; in a `when` expression only C014. Fields named ``_...`` are
runtime fields nodes add to outputs (``_session_id``, ``_tokens``...): exempt from C031/C032.
"""

from __future__ import annotations

from iterion.dsl.compiler import Sources
from iterion.dsl.diagnostics import Sink
from iterion.dsl.grammar import suggest
from iterion.dsl.graph import Graph
from iterion.dsl.located import Located
from iterion.expr import ATTACHMENT_FIELDS, ExprSyntaxError, Reference, expr_references, parse_expr
from iterion.ir import NodeKind, Span, Workflow
from iterion.templates import TemplateSyntaxError, template_references

_TOOL_OUTPUT = ("result", "stdout", "stderr", "exit_code")


class _Checker:
    def __init__(self, wf: Workflow, g: Graph, sink: Sink) -> None:
        self.wf = wf
        self.g = g
        self.sink = sink
        self.artifacts = {n.publish for n in wf.nodes.values() if n.publish}
        self.reachable = (g.reach(wf.entry) | {wf.entry}) if wf.entry in wf.nodes else frozenset()
        self._template_cache: dict[Located, list[Reference]] = {}

    def template(self, loc: Located) -> list[Reference]:
        got = self._template_cache.get(loc)
        if got is None:
            try:
                got = template_references(loc.text)
            except TemplateSyntaxError as exc:
                if not exc.include:  # an include that cannot be expanded is the compiler's L003 (docs/language.md §6)
                    self.sink.add("C004", loc.span_at(exc.offset), exc.message,
                                  "a template reference looks like {{vars.NAME}} or {{outputs.NODE.FIELD}}")
                got = []
            self._template_cache[loc] = got
        return got

    def expression(self, loc: Located, what: str) -> list[Reference]:
        try:
            # bare names (fields of the implicit input) are not checked (docs/language.md §3)
            return [r for r in expr_references(parse_expr(loc.text)) if not r.implicit]
        except ExprSyntaxError as exc:
            self.sink.add("C040", loc.span_at(exc.offset), f"{what} does not parse: {exc.message}",
                          'expressions look like "outputs.node.count > 2 && vars.strict"')
            return []

    def check(self, ref: Reference, loc: Located, consumer: str | None, via_edge: bool) -> None:
        """``consumer`` None: a prompt no node uses, so only what holds for any reader is checked."""
        span = loc.span_at(ref.offset)
        ns, path = ref.namespace, ref.path
        if not path:
            return
        name = path[0]
        wf = self.wf
        if ns == "vars":
            if name not in wf.vars:
                self.sink.add("C033", span, f"undeclared var '{name}' in {{{{vars.{name}}}}}",
                              suggest(name, tuple(wf.vars)) if wf.vars else "declare it under vars:")
        elif ns == "input":
            self.input_field(name, span, consumer)
        elif ns == "outputs":
            self.output(ref, span, consumer, via_edge)
        elif ns == "artifacts":
            if name not in self.artifacts:
                self.sink.add("C035", span, f"unknown artifact '{name}': no node publishes it",
                              suggest(name, tuple(sorted(self.artifacts))) if self.artifacts else "set publish: NAME on the producing node")
        elif ns == "attachments":
            if name not in wf.attachments:
                self.sink.add("C053", span, f"unknown attachment '{name}'",
                              suggest(name, tuple(wf.attachments)) if wf.attachments else "declare it under attachments:")
            elif len(path) >= 2 and (path[1] not in ATTACHMENT_FIELDS or len(path) > 2):
                self.sink.add("C054", span, f"unknown attachment field '{'.'.join(path[1:])}' in {{{{attachments.{'.'.join(path)}}}}}",
                              "expected one of: " + ", ".join(ATTACHMENT_FIELDS))
        elif ns == "loop":
            if name not in wf.loops:
                self.sink.add("C106", span, f"unknown loop '{name}'",
                              suggest(name, tuple(wf.loops)) if wf.loops else "loops are declared on edges: a -> b as NAME(N)")

    def when_reference(self, ref: Reference, loc: Located, src: str) -> None:
        """A `when "EXPRESSION"`: "`outputs.SRC.f` references are checked against SRC's schema
        (C014); bare names are not checked" (docs/language.md 3); nothing else in it is (5)."""
        path = ref.path
        node = self.wf.nodes.get(src)
        if ref.namespace != "outputs" or len(path) < 2 or path[0] != src or node is None:
            return
        f = path[1]
        schema = node.output_schema
        if f.startswith("_") or f == "history" or schema is None or schema.field(f) is not None:
            return
        self.sink.add("C014", loc.span_at(ref.offset),
                      f"'outputs.{src}.{f}': '{f}' is not a field of schema '{schema.name}' (output of '{src}')",
                      suggest(f, tuple(x.name for x in schema.fields)))

    def input_field(self, name: str, span: Span, consumer: str | None) -> None:
        if not consumer:
            return
        node = self.wf.nodes.get(consumer)
        if node is None:
            return
        if node.input_schema is not None:
            if node.input_schema.field(name) is None:
                self.sink.add("C034", span, f"'input.{name}': '{name}' is not a field of '{consumer}''s input schema '{node.input_schema.name}'",
                              "fields: " + ", ".join(f.name for f in node.input_schema.fields))
            return
        # C034 is only "`input.f` not in the consumer's input schema" (docs/language.md §5.1): without
        # a schema the original accepts any field, so a key no edge passes is this project's
        # warning, C114 (§7: a C1xx fault the original accepts is only a warning)
        keys = {k for e in self.g.into[consumer] for k, _ in e.with_map}
        if keys and name not in keys:
            self.sink.add("C114", span, f"'input.{name}': no edge into '{consumer}' passes '{name}' in its with map",
                          "passed keys: " + ", ".join(sorted(keys)))

    def output(self, ref: Reference, span: Span, consumer: str | None, via_edge: bool) -> None:
        wf = self.wf
        name = ref.path[0]
        node = wf.nodes.get(name)
        if node is None or node.kind is NodeKind.FAIL:
            self.sink.add("C029", span, f"'outputs.{name}': '{name}' is not a node with an output",
                          suggest(name, tuple(wf.nodes)))
            return
        if len(ref.path) >= 2:
            f = ref.path[1]
            if f.startswith("_"):
                pass  # a runtime field (_session_id, _tokens, ...): present whatever the schema
            elif f == "history":
                if name not in self.g.loop_nodes():
                    self.sink.add("C017", span, f"'outputs.{name}.history': '{name}' is not inside any loop",
                                  "history holds every iteration's output, so it exists only for nodes in a loop")
            elif node.output_schema is not None:
                if node.output_schema.field(f) is None:
                    self.sink.add("C031", span, f"'outputs.{name}.{f}': '{f}' is not a field of schema '{node.output_schema.name}'",
                                  suggest(f, tuple(x.name for x in node.output_schema.fields)))
            elif node.kind is NodeKind.TOOL:
                # schemaless: a JSON object on stdout is the output, else {result, stdout, stderr,
                # exit_code} (docs/language.md §2): another field cannot be checked (C032, a warning)
                if f not in _TOOL_OUTPUT:
                    self.sink.add("C032", span, f"'outputs.{name}.{f}': tool '{name}' has no output schema, so '{f}' "
                                  "cannot be checked (its text output is {result, stdout, stderr, exit_code})",
                                  "declare output: SCHEMA on the tool")
            else:
                self.sink.add("C032", span, f"'outputs.{name}.{f}': '{name}' has no output schema, so '{f}' cannot be checked",
                              f"declare output: SCHEMA on '{name}'")
        if consumer is None or consumer not in self.reachable:
            return  # an unreachable consumer is reported once (C016), not per reference
        ok = (via_edge and name == consumer) or self.g.reaches(name, consumer)
        if not ok:
            what = f"the edge out of '{consumer}'" if via_edge else f"'{consumer}'"
            self.sink.add("C036", span, f"'outputs.{name}' is read by {what}, but '{name}' does not run before it",
                          f"only nodes on a path to '{consumer}' have an output when it runs")


def check_references(wf: Workflow, g: Graph, sources: Sources, sink: Sink) -> None:
    c = _Checker(wf, g, sink)
    for node_id, items in sources.node_templates.items():
        if node_id not in wf.nodes:
            continue
        for _what, loc in items:
            for ref in c.template(loc):
                c.check(ref, loc, node_id, via_edge=False)
    for locs in sources.prompts.values():
        for loc in locs:
            for ref in c.template(loc):
                c.check(ref, loc, None, via_edge=False)
    for node_id, exprs in sources.node_exprs.items():
        if node_id not in wf.nodes:
            continue
        for fname, loc in exprs:
            for ref in c.expression(loc, f"expression for '{fname}' of compute '{node_id}'"):
                c.check(ref, loc, node_id, via_edge=False)
    for idx, items in sources.edge_templates.items():
        edge = wf.edges[idx]
        for key, loc in items:
            refs = c.template(loc)  # malformed: C004, loop bounds included
            if key == "loop bound":
                continue  # a bound's references are resolved at run time, unchecked (docs/language.md §3, 5.1)
            for ref in refs:
                c.check(ref, loc, edge.src, via_edge=True)
    for idx, loc in sources.edge_exprs.items():
        edge = wf.edges[idx]
        for ref in c.expression(loc, f"condition of {edge.src} -> {edge.dst}"):
            c.when_reference(ref, loc, edge.src)
