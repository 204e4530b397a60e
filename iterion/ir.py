"""The compiled workflow (IR): the contract between the DSL compiler and the engine.

The compiler (``iterion.dsl``) produces a ``Workflow``; the engine executes it and the rewind
reads its graph. Nothing here parses text or executes anything. Prompts are resolved to their
text (includes already inlined, ``${ENV}`` already substituted); ``{{...}}`` templates are
left in place for the engine to render at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gitrefs.persist.text import one_line

DONE = "done"
FAIL = "fail"
TERMINALS = frozenset({DONE, FAIL})


@dataclass(frozen=True, slots=True)
class Span:
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{one_line(self.file)}:{self.line}:{self.column}"  # one line whatever the file name


class NodeKind(StrEnum):
    AGENT = "agent"
    JUDGE = "judge"
    ROUTER = "router"
    HUMAN = "human"
    TOOL = "tool"
    COMPUTE = "compute"
    FAIL = "fail"  # a named fail node (`fail NAME:`); the built-in terminals are not nodes
    SUBBOT = "subbot"  # a child workflow run as one node (extension, docs/language.md 2.14)


class RouterMode(StrEnum):
    FAN_OUT_ALL = "fan_out_all"
    CONDITION = "condition"
    ROUND_ROBIN = "round_robin"
    LLM = "llm"


class AwaitMode(StrEnum):
    WAIT_ALL = "wait_all"
    BEST_EFFORT = "best_effort"


class FieldType(StrEnum):
    STRING = "string"
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    JSON = "json"
    STRING_LIST = "string[]"
    FILE = "file"


@dataclass(frozen=True)
class SchemaField:
    name: str
    type: FieldType
    enum: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Schema:
    name: str
    fields: tuple[SchemaField, ...]

    def field(self, name: str) -> SchemaField | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True)
class Var:
    name: str
    type: FieldType
    default: Any = None
    has_default: bool = False


@dataclass(frozen=True)
class Attachment:
    name: str
    kind: str  # "file" | "image"
    description: str | None = None
    accept_mime: tuple[str, ...] = ()
    required: bool = False


@dataclass(slots=True)  # many per workflow: no per-instance dict (memory linear and small)
class Node:
    """One executable node. Only the fields of its kind are meaningful; others keep defaults."""

    id: str
    kind: NodeKind
    span: Span
    input_schema: Schema | None = None
    output_schema: Schema | None = None
    await_mode: AwaitMode | None = None
    interaction: str | None = None  # none | human | llm | llm_or_human
    # agent / judge / llm router / llm human
    model: str | None = None
    backend: str | None = None
    system: str | None = None  # resolved prompt text (a template)
    user: str | None = None  # resolved prompt text (a template)
    system_ref: str | None = None  # the prompt name it came from, if any (for the diff)
    user_ref: str | None = None
    publish: str | None = None
    session: str = "fresh"
    tools: tuple[str, ...] = ()
    tool_max_steps: int | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    readonly: bool = False
    # as written: `${...}` in these expands when the node runs (docs/language.md §1)
    provider: str | None = None  # credential routing hint
    interaction_model: str | None = None  # the model answering in llm interaction modes
    interaction_prompt: str | None = None  # resolved prompt text guiding llm_or_human, if declared
    interaction_prompt_ref: str | None = None
    # `cursors:` settings (cursor name -> value; "enabled" -> bool); the fragments they select
    # are appended to the system prompt under "## Calibration" (docs/language.md §2)
    cursors: dict[str, Any] = field(default_factory=dict)
    # router
    mode: RouterMode | None = None
    multi: bool = False
    # human
    instructions: str | None = None  # resolved prompt text (a template)
    instructions_ref: str | None = None
    min_answers: int | None = None
    # tool
    command: str | None = None  # a template; exactly one of command / script
    script: str | None = None
    language: str | None = None  # the interpreter: sh | bash | python | node (js, py, python3 as written)
    # compute: output field -> expression source
    exprs: dict[str, str] = field(default_factory=dict)
    # named fail node
    code: str | None = None
    message: str | None = None  # a template
    resumable: bool = False
    # subbot: `source:` as written, the child's path relative to the main file's directory
    # (resolved like an import), and `with:` (child var -> template) in declaration order
    source: str | None = None
    source_path: str | None = None
    subbot_with: tuple[tuple[str, str], ...] = ()
    # properties the language accepts but this version does not execute
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_llm(self) -> bool:
        return self.kind in (NodeKind.AGENT, NodeKind.JUDGE) or (
            self.kind is NodeKind.ROUTER and self.mode is RouterMode.LLM
        )


class ConditionKind(StrEnum):
    FIELD = "field"  # when x
    NOT_FIELD = "not_field"  # when not x
    EXPR = "expr"  # when "expression"


@dataclass(frozen=True)
class Condition:
    kind: ConditionKind
    field: str | None = None
    expr: str | None = None

    def __str__(self) -> str:
        if self.kind is ConditionKind.FIELD:
            return f"when {self.field}"
        if self.kind is ConditionKind.NOT_FIELD:
            return f"when not {self.field}"
        return f'when "{self.expr}"'


@dataclass(frozen=True, slots=True)
class Edge:
    index: int  # declaration order within the workflow: ties are broken by it
    src: str
    dst: str  # a node id, DONE, FAIL
    span: Span
    condition: Condition | None = None
    loop: str | None = None  # `as LOOP(N)`: this edge closes loop LOOP
    loop_max: int | None = None
    # `as LOOP("{{ref}}")`: the bound is this template, resolved whenever the edge is considered
    # (engine.edges.loop_bound); loop_max is then None
    loop_bound: str | None = None
    with_map: tuple[tuple[str, str], ...] = ()  # (key, template) in declaration order

    @property
    def unconditional(self) -> bool:
        return self.condition is None


@dataclass(frozen=True)
class Loop:
    name: str
    max: int  # 0 for a template bound (see ``bound``)
    edges: tuple[int, ...]  # indices of the edges that close it
    bound: str | None = None  # the template bound, resolved at run time


@dataclass(frozen=True)
class FanOutRegion:
    """A fan_out_all router, the nodes its branches run, and where they converge."""

    router: str
    branches: tuple[tuple[str, ...], ...]  # per outgoing edge: the body nodes of that branch
    # the convergence node (iterion.dsl.convergence: the first node declaring await or with edges
    # from two or more distinct sources), or None if the branches end at terminals
    join: str | None

    @property
    def body(self) -> frozenset[str]:
        return frozenset(n for branch in self.branches for n in branch)


@dataclass(frozen=True)
class Budget:
    max_parallel_branches: int | None = None
    max_duration_s: float | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_iterations: int | None = None


def _closure(start: str, step: Callable[[str], Iterable[str]]) -> set[str]:
    seen: set[str] = set()
    stack = list(step(start))
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(step(n))
    return seen


@dataclass
class Workflow:
    name: str
    entry: str
    nodes: dict[str, Node]
    edges: list[Edge]
    loops: dict[str, Loop] = field(default_factory=dict)
    vars: dict[str, Var] = field(default_factory=dict)
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    attachments: dict[str, Attachment] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, Schema] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    worktree: bool = False  # `worktree: auto`
    push_checkpoints: str | None = None  # `push_checkpoints: origin` (a remote name, URL or path)
    push_every: int = 0  # `push_every: N`: also push every N completed nodes
    default_backend: str | None = None
    interaction: str | None = None
    fan_out_regions: dict[str, FanOutRegion] = field(default_factory=dict)
    span: Span | None = None
    # accepted-but-not-executed workflow-scope settings (sandbox:, permission:, ...)
    extra: dict[str, Any] = field(default_factory=dict)
    _edges_by: tuple[tuple[int, int], dict[str, list[Edge]], dict[str, list[Edge]]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def _edge_index(self) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
        """Edges by source and by target, built once per edge list (a scan per call made a
        run of an N-node chain quadratic); rebuilt if the list is replaced or grows."""
        key = (id(self.edges), len(self.edges))
        cached = self._edges_by
        if cached is None or cached[0] != key:
            out: dict[str, list[Edge]] = {}
            into: dict[str, list[Edge]] = {}
            for e in self.edges:
                out.setdefault(e.src, []).append(e)
                into.setdefault(e.dst, []).append(e)
            cached = self._edges_by = (key, out, into)
        return cached[1], cached[2]

    def out_edges(self, node_id: str) -> list[Edge]:
        return list(self._edge_index()[0].get(node_id, ()))

    def in_edges(self, node_id: str) -> list[Edge]:
        return list(self._edge_index()[1].get(node_id, ()))

    def successors(self, node_id: str) -> Iterator[str]:
        for e in self.out_edges(node_id):
            if e.dst not in TERMINALS:
                yield e.dst

    def predecessors(self, node_id: str) -> Iterator[str]:
        for e in self.in_edges(node_id):
            yield e.src

    def reachable_from(self, start: str) -> set[str]:
        """Node ids forward-reachable from ``start`` (``start`` included only via a cycle)."""
        return _closure(start, self.successors)

    def ancestors_of(self, node: str) -> set[str]:
        """Node ids that can reach ``node`` (``node`` included only via a cycle)."""
        return _closure(node, self.predecessors)

    def region_of(self, node_id: str) -> FanOutRegion | None:
        """The OUTERMOST fan-out region whose body contains ``node_id`` (None if not in one)."""
        found: FanOutRegion | None = None
        for region in self.fan_out_regions.values():
            if node_id in region.body:
                if found is None or found.router in region.body:
                    found = region
        return found
