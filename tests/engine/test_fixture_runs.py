"""Every workflow under fixtures/workflows/ runs end to end on the script backend, and executes
each node as many times as the spec implies (issue 28).

Canned outputs are generated from each node's output schema (bool true, int 1, float 1.0,
string "x" or the first enum value, string[] ["x"], json {}), for LLM nodes through the
script backend, for human nodes as answers given up front, and for tool nodes by replacing
the command with one printing that JSON (the fixtures' commands - `pytest`, `make` - are not
this machine's). Compute nodes evaluate their expressions for real.

The expected counts come from an independent model of dsl.md §3 written here: edge selection
(§3.3), loops, their bounds, counter resets and the lag of `previous_output` (§3.5), fan-out
branches stopping at the convergence node (§3.4), round_robin and llm routers (§2.5), named fail
nodes (§2.11). The model reads the outputs the run recorded (so compute results need not be
re-derived) and decides every route itself; the engine's route must agree node for node, and
where a fan-out's branches stopped must be the validator's convergence node.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import yaml

from iterion.budget import BudgetAsk
from iterion.dsl.convergence import Convergence, is_fan_out_router
from iterion.engine.launch import LaunchOptions, launch_run
from iterion.engine.source import compile_source
from iterion.expr import ExprError, evaluate, resolve_reference, truthy
from iterion.ir import DONE, FAIL, TERMINALS, ConditionKind, Edge, FieldType, NodeKind, RouterMode, Schema, Workflow
from iterion.store import RunStatus, Store
from iterion.templates import template_references

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "fixtures" / "workflows"
VALID = sorted([*WORKFLOWS.glob("*.bot"), *WORKFLOWS.glob("*.iter"), WORKFLOWS / "imports" / "main.bot",
                WORKFLOWS / "bundle_dir"])
ENV = {"MODEL": "claude-test", "DEPLOY_TARGET": "prod", "DEFAULT_BACKEND": "claw"}
CAP = 60  # max_iterations: a cycle with no bound (accepted when it touches a loop, §3.2) ends here
_CANNED = {FieldType.BOOL: True, FieldType.INT: 1, FieldType.FLOAT: 1.0, FieldType.STRING: "x",
           FieldType.STRING_LIST: ["x"], FieldType.JSON: {}, FieldType.FILE: "canned.txt"}


def canned(schema: Schema | None) -> dict[str, Any]:
    return {f.name: (f.enum[0] if f.enum else _CANNED[f.type]) for f in (schema.fields if schema else ())}


@dataclass
class Outcome:
    counts: Counter[str] = field(default_factory=Counter)
    status: str = "finished"
    code: str | None = None
    node: str | None = None  # where a failure happened


class Failed(Exception):
    def __init__(self, node: str, code: str | None, status: str = "failed_resumable") -> None:
        super().__init__(node)
        self.node, self.code, self.status = node, code, status


class Model:
    """dsl.md §3 over the outputs the run recorded (``outputs``: node -> its output per iteration)."""

    def __init__(self, wf: Workflow, recorded: dict[str, list[dict[str, Any]]], vars: dict[str, Any]) -> None:
        self.wf, self.recorded, self.vars = wf, recorded, vars
        self.conv = Convergence(wf)
        self.out: dict[str, list[Edge]] = {}
        for e in wf.edges:
            self.out.setdefault(e.src, []).append(e)
        self.latest: dict[str, dict[str, Any]] = {}
        self.loops: dict[str, dict[str, Any]] = {n: {"iteration": 0, "crossed": None, "previous": None}
                                                 for n in wf.loops}
        self.rr: Counter[str] = Counter()
        self.result = Outcome()
        self.executions = 0

    # -- the walk ---------------------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            end = self.walk(self.wf.entry, None)
            if end == FAIL:
                raise Failed(FAIL, "WORKFLOW_FAILED", "failed")
            node = self.wf.nodes.get(end)
            if node is not None and node.kind is NodeKind.FAIL:
                self.result.counts[end] += 1  # reaching it records its verdict as its output
                raise Failed(end, node.code, "failed_resumable" if node.resumable else "failed")
        except Failed as f:
            self.result.status, self.result.code, self.result.node = f.status, f.code, f.node
        return self.result

    def walk(self, n: str, stop: str | None, branch: bool = False) -> str:
        """From ``n`` until ``stop`` (a convergence node), a terminal or a fail node: where it ended."""
        while n != stop and n not in TERMINALS:
            node = self.wf.nodes[n]
            if node.kind is NodeKind.FAIL:
                if branch:
                    raise Failed(n, node.code)  # a branch's diagnosis fails the fan-out (wait_all)
                return n
            output = self.execute(n)
            if is_fan_out_router(self.wf, n):
                edges = self.out.get(n, [])
                join = self.conv.of_router(n)
                self.refuse_mutating(n, edges, join)
                for e in edges:
                    self.take(e, output)
                    end = self.walk(e.dst, join, branch=True)
                    if end == FAIL or end in self.wf.nodes and self.wf.nodes[end].kind is NodeKind.FAIL:
                        raise Failed(n, None)
                n = join or DONE
                continue
            e = self.choose(n, output)
            self.take(e, output)
            n = e.dst
        return n

    def execute(self, n: str) -> dict[str, Any]:
        if self.executions >= CAP:
            raise Failed(n, "BUDGET_EXCEEDED")
        self.executions += 1
        it = self.result.counts[n]
        runs = self.recorded.get(n, [])
        if it >= len(runs):
            raise Failed(n, None)  # the node itself failed (a compute expression...): the run did too
        self.result.counts[n] += 1
        self.latest[n] = runs[it]
        return runs[it]

    # -- §3.4 safety --------------------------------------------------------------------------------
    def refuse_mutating(self, router: str, edges: list[Edge], join: str | None) -> None:
        def mutating(nid: str) -> bool:
            node = self.wf.nodes[nid]
            return (node.kind in (NodeKind.AGENT, NodeKind.JUDGE, NodeKind.HUMAN) and not node.readonly
                    and any(fnmatchcase(t, p) for p in node.tools for t in ("write_file", "edit_file", "bash")))

        writers = 0
        for e in edges:
            seen, todo = set(), [e.dst]
            while todo:
                x = todo.pop()
                if x in seen or x in TERMINALS or x == join or x == router or x not in self.wf.nodes:
                    continue
                seen.add(x)
                todo += [d.dst for d in self.out.get(x, [])]
            writers += any(mutating(x) for x in seen)
        if writers > 1:
            raise Failed(router, "WORKSPACE_SAFETY")

    # -- §3.3 and §2.5 -----------------------------------------------------------------------------
    def scope(self, output: dict[str, Any]) -> dict[str, Any]:
        loops = {}
        for name, loop in self.wf.loops.items():
            st = self.loops[name]
            loops[name] = {"iteration": st["iteration"], "max": loop.max, "previous_output": st["previous"] or {}}
        return {"vars": self.vars, "input": output, "outputs": dict(self.latest), "loop": loops, "run": {"id": "r"},
                "artifacts": {n.publish: self.latest[i] for i, n in self.wf.nodes.items()
                              if n.publish and i in self.latest}}

    def bound(self, e: Edge, output: dict[str, Any]) -> int:
        if e.loop_bound is None:
            return e.loop_max or 0
        for ref in reversed(template_references(e.loop_bound)):
            try:
                value = resolve_reference(ref, self.scope(output))
            except ExprError:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return int(value)
        return 0

    def exhausted(self, e: Edge, output: dict[str, Any]) -> bool:
        return e.loop is not None and self.loops[e.loop]["iteration"] >= self.bound(e, output)

    def holds(self, e: Edge, output: dict[str, Any]) -> bool:
        c = e.condition
        if c is None:
            return True
        if c.kind is not ConditionKind.EXPR:
            value = output.get(c.field or "")
            return isinstance(value, bool) and value is (c.kind is ConditionKind.FIELD)
        try:
            return truthy(evaluate(c.expr or "", self.scope(output)))
        except ExprError:
            return False  # skipped with a warning

    def choose(self, n: str, output: dict[str, Any]) -> Edge:
        node, edges = self.wf.nodes[n], self.out.get(n, [])
        if node.kind is NodeKind.ROUTER and node.mode is RouterMode.ROUND_ROBIN:
            cycle = [e for e in edges if e.condition is None]
            e = cycle[self.rr[n] % len(cycle)]
            self.rr[n] += 1
            return e
        if node.kind is NodeKind.ROUTER and node.mode is RouterMode.LLM:
            return edges[0]  # the script backend selects the first target
        fallback = None
        for e in edges:
            if e.condition is None:
                if fallback is None and not self.exhausted(e, output):
                    fallback = e
            elif self.holds(e, output) and not self.exhausted(e, output):
                return e
        if fallback is None:
            raise Failed(n, "NO_OUTGOING_EDGE")
        return fallback

    # -- §3.5 -------------------------------------------------------------------------------------
    def body(self, loop: str) -> set[str]:
        usable = [e for e in self.wf.edges if e.loop in (None, loop)]

        def closure(start: str, forward: bool) -> set[str]:
            seen, todo = {start}, [start]
            while todo:
                x = todo.pop()
                for e in usable:
                    a, b = (e.src, e.dst) if forward else (e.dst, e.src)
                    if a == x and b not in seen:
                        seen.add(b)
                        todo.append(b)
            return seen

        found: set[str] = set()
        for e in self.wf.edges:
            if e.loop == loop:
                found |= closure(e.dst, True) & closure(e.src, False)
        return found

    def take(self, e: Edge, output: dict[str, Any]) -> None:
        if e.loop is None:
            for le in self.wf.edges:
                if le.loop is not None and le.dst == e.dst and e.src not in self.body(le.loop):
                    self.loops[le.loop]["iteration"] = 0
            return
        st = self.loops[e.loop]
        st["iteration"] += 1
        st["previous"], st["crossed"] = st["crossed"], dict(output)


def _prepare(path: Path, tmp: Path) -> tuple[Any, LaunchOptions]:
    src = compile_source(path)
    wf = src.workflow
    script: dict[str, Any] = {}
    answers: dict[str, dict[str, Any]] = {}
    for nid, node in wf.nodes.items():
        if node.kind is NodeKind.TOOL:
            node.command = "printf '%s\\n' " + shlex.quote(json.dumps(canned(node.output_schema) or {"ok": True}))
            node.script = node.language = None
        elif node.kind is NodeKind.ROUTER and node.mode is RouterMode.LLM:
            script[nid] = {"*": {"select": wf.out_edges(nid)[0].dst}}
        elif node.is_llm or node.kind is NodeKind.HUMAN:
            script[nid] = {"*": {"output": canned(node.output_schema)}}
            if node.kind is NodeKind.HUMAN:
                answers[nid] = canned(node.output_schema)
    (tmp / "script.yaml").write_text(yaml.safe_dump(script))
    attachments = {}
    for name, att in wf.attachments.items():
        (tmp / f"{name}.txt").write_text("attached\n")
        if att.required:
            attachments[name] = tmp / f"{name}.txt"
    given = {n: "1" for n, v in wf.vars.items() if not v.has_default}
    # --sandbox none: the flow is what is checked here (tests/sandbox runs the sandbox itself); the
    # container forms some fixtures spell (inline, image:, build:) are refused by design
    return src, LaunchOptions(backend="script", script_file=str(tmp / "script.yaml"), answers=answers, vars=given,
                              attachments=attachments, watch=False, budget=BudgetAsk(max_iterations=CAP),
                              sandbox="none")


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_fixture_runs_as_the_spec_says(path: Path, tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    src, options = _prepare(path, tmp_path)
    options.workspace = ws
    store = Store(tmp_path / "store")
    result = launch_run(store, path, options, compiled=src)
    wf = src.workflow
    cp = store.load_checkpoint(result.run_id)
    engine = Counter(n for n, _ in ((e.node, e.iteration) for e in cp.executed))
    # what each node output at each execution (a node on no cycle keeps only its latest)
    recorded = {n: list(cp.history.get(n) or [cp.outputs[n]]) for n in cp.outputs}
    doc = store.load_run(result.run_id)
    expected = Model(wf, recorded, doc.vars).run()
    assert dict(engine) == dict(expected.counts), (result.status, result.failure_code, result.error)
    assert result.status.value == expected.status, (result.failure_code, result.error, expected)
    if expected.code is not None:
        assert result.failure_code == expected.code, result.error
    if expected.status == "failed_resumable" and expected.node not in (None, FAIL):
        assert cp.restart_node == expected.node or result.status is RunStatus.FAILED_RESUMABLE
    # the engine's branches stopped at the validator's convergence node
    for e in store.read_events(result.run_id):
        if e.type == "branch_started" and e.node in wf.fan_out_regions:
            assert e.payload["join"] == wf.fan_out_regions[e.node].join, (e.node, e.payload)
