"""Pure parts on hand-built IR: edge selection and loops; tool processes and their group kill."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from iterion.engine.cancel import CancelToken, call_cancellable
from iterion.engine.coerce import AnswerError, coerce_answers, validate_output
from iterion.engine.edges import select_edge, take_edge
from iterion.engine.errors import Cancelled, NodeFailure
from iterion.engine.state import RunState, from_checkpoint, to_checkpoint
from iterion.engine.toolproc import run_command, run_script
from iterion.budget import Usage
from iterion.ir import Condition, ConditionKind, Edge, FieldType, Loop, Node, NodeKind, Schema, SchemaField, Span, Workflow
from iterion.store import AnchorReason

SP = Span("t.bot", 1, 1)


def _wf(edges: list[Edge], loops: dict[str, Loop] | None = None) -> Workflow:
    names = {e.src for e in edges} | {e.dst for e in edges if e.dst not in ("done", "fail")}
    nodes = {n: Node(n, NodeKind.COMPUTE, SP) for n in names}
    return Workflow("w", "a", nodes, edges, loops=loops or {})


def test_conditional_first_then_fallback_in_declaration_order() -> None:
    e0 = Edge(0, "a", "b", SP, Condition(ConditionKind.FIELD, field="ok"))
    e1 = Edge(1, "a", "c", SP)
    e2 = Edge(2, "a", "d", SP, Condition(ConditionKind.NOT_FIELD, field="ok"))
    wf = _wf([e1, e0, e2])
    st = RunState("r")
    assert select_edge(wf, "a", {"ok": True}, {}, st) is e0
    assert select_edge(wf, "a", {"ok": False}, {}, st) is e2
    assert select_edge(_wf([e0, e1]), "a", {"ok": False}, {}, st) is e1


def test_expression_condition_and_its_failure_code() -> None:
    e0 = Edge(0, "a", "b", SP, Condition(ConditionKind.EXPR, expr="outputs.a.n > 2"))
    e1 = Edge(1, "a", "c", SP)
    wf = _wf([e0, e1])
    st = RunState("r")
    assert select_edge(wf, "a", {"n": 3}, {"outputs": {"a": {"n": 3}}}, st) is e0
    assert select_edge(wf, "a", {"n": 1}, {"outputs": {"a": {"n": 1}}}, st) is e1
    # a missing value is null; `null > 2` fails to evaluate: the edge is skipped with a warning
    warnings: list[tuple[str, dict[str, object]]] = []
    assert select_edge(wf, "a", {}, {"outputs": {}}, st, warn=lambda m, p: warnings.append((m, p))) is e1
    assert [p["code"] for _, p in warnings] == ["when_failed"] and warnings[0][1]["to"] == "b"
    # bare names are fields of the source's output
    e2 = Edge(0, "a", "b", SP, Condition(ConditionKind.EXPR, expr="n > 2 and not skip"))
    assert select_edge(_wf([e2, e1]), "a", {"n": 3, "skip": False}, {}, st) is e2
    assert select_edge(_wf([e2, e1]), "a", {"n": 3, "skip": "yes"}, {}, st) is e1


def test_loop_edge_counts_and_is_not_taken_once_exhausted() -> None:
    back = Edge(0, "b", "a", SP, Condition(ConditionKind.NOT_FIELD, field="ok"), loop="fix", loop_max=2)
    out = Edge(1, "b", "done", SP, Condition(ConditionKind.FIELD, field="ok"))
    wf = _wf([Edge(2, "a", "b", SP), back, out], {"fix": Loop("fix", 2, (0,))})
    st = RunState("r")
    for i in range(2):
        edge = select_edge(wf, "b", {"ok": False, "i": i}, {}, st)
        assert edge is back
        take_edge(edge, st, {"ok": False, "i": i})
    # previous_output is the output at the PREVIOUS crossing, one behind (dsl.md 3.5)
    assert st.loops["fix"].iteration == 2 and st.loops["fix"].previous_output == {"ok": False, "i": 0}
    assert st.loops["fix"].crossed_output == {"ok": False, "i": 1}
    with pytest.raises(NodeFailure) as info:
        select_edge(wf, "b", {"ok": False}, {}, st)
    assert info.value.code == "NO_OUTGOING_EDGE" and "fix(2) is exhausted" in info.value.message
    assert select_edge(wf, "b", {"ok": True}, {}, st) is out


def test_an_exhausted_plain_loop_edge_falls_through_to_the_next_plain_edge() -> None:
    # dsl.md 3.3: "else the first non-conditional edge not skipped" (`polish -> polish as passes(3)`
    # then `polish -> done`)
    again = Edge(0, "p", "p", SP, loop="passes", loop_max=3)
    out = Edge(1, "p", "done", SP)
    wf = _wf([again, out], {"passes": Loop("passes", 3, (0,))})
    st = RunState("r")
    for _ in range(3):
        edge = select_edge(wf, "p", {}, {}, st)
        assert edge is again
        take_edge(edge, st, {})
    assert select_edge(wf, "p", {}, {}, st) is out


def test_checkpoint_round_trip_keeps_every_field() -> None:
    st = RunState("r", vars={"x": 1}, outputs={"a": {"v": 1}}, history={"a": [{"v": 0}, {"v": 1}]},
                  inputs={"b": {"k": "v"}}, visits={"a": 2}, executed=[("a", 0), ("a", 1)],
                  round_robin={"rr": 3}, artifact_versions={"rep": 2}, sessions={"a": "s1"},
                  recovery_attempts={"a": {"RATE_LIMITED": 1}}, came_from="a")
    st.loop("fix").iteration = 1
    st.loop("fix").previous_output = {"ok": False}
    cp = to_checkpoint(st, usage=Usage(tokens=5, cost_usd=0.25, iterations=3), anchor=AnchorReason.NODE_BOUNDARY,
                       restart_node="b", restart_iteration=0)
    back = from_checkpoint(type(cp).model_validate_json(cp.model_dump_json()))
    for attr in ("vars", "outputs", "history", "inputs", "visits", "executed", "round_robin", "artifact_versions",
                 "sessions", "recovery_attempts", "came_from"):
        assert getattr(back, attr) == getattr(st, attr), attr
    assert back.loops["fix"].iteration == 1 and back.loops["fix"].previous_output == {"ok": False}
    assert back.next_node == "b" and cp.accounting.tokens == 5


def test_schema_validation_and_answer_coercion() -> None:
    schema = Schema("s", (SchemaField("ok", FieldType.BOOL), SchemaField("n", FieldType.INT),
                          SchemaField("tags", FieldType.STRING_LIST),
                          SchemaField("mode", FieldType.STRING, enum=("a", "b"))))
    assert coerce_answers("h", schema, {"ok": "yes", "n": "3", "tags": "x, y", "mode": "a"}) == {
        "ok": True, "n": 3, "tags": ["x", "y"], "mode": "a"}
    with pytest.raises(AnswerError, match="not one of"):
        coerce_answers("h", schema, {"ok": "yes", "n": "3", "tags": "x", "mode": "c"})
    with pytest.raises(AnswerError, match="no answer field"):
        coerce_answers("h", schema, {"bogus": "1"})
    with pytest.raises(NodeFailure) as info:
        validate_output("n", schema, {"ok": 1, "n": 2, "tags": [], "mode": "a"})
    assert info.value.code == "SCHEMA_VALIDATION"


def test_cancel_kills_the_whole_process_group(tmp_path: Path) -> None:
    token = CancelToken()
    threading.Timer(0.3, token.cancel, args=("test cancel",)).start()
    with pytest.raises(Cancelled, match="test cancel"):
        run_command("sleep 30 & echo $! > child.pid; wait", cwd=tmp_path, env=dict(os.environ), token=token)
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{child}/stat").read_text().split()[2] if Path(f"/proc/{child}/stat").exists() else "Z"
        if stat == "Z":
            break
        time.sleep(0.05)
    alive = Path(f"/proc/{child}/stat").exists() and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    assert not alive


def test_scripts_run_in_their_language_outside_the_workspace(tmp_path: Path) -> None:
    res = run_script("import os\nprint(sorted(os.listdir('.')))", "python", cwd=tmp_path, env=dict(os.environ),
                     token=CancelToken())
    assert res.exit_code == 0 and res.stdout.strip() == "[]"  # the script file is not in the workspace
    res = run_script("echo $0 >&2; exit 4", "bash", cwd=tmp_path, env=dict(os.environ), token=CancelToken())
    assert res.exit_code == 4 and res.stderr.strip().endswith(".sh")


def test_call_cancellable_returns_or_stops_at_once() -> None:
    token = CancelToken()
    assert call_cancellable(lambda: 42, token) == 42
    threading.Timer(0.1, token.cancel).start()
    with pytest.raises(Cancelled):
        call_cancellable(lambda: time.sleep(5), token)


def test_a_command_runs_under_bash(tmp_path: Path) -> None:
    # dsl.md 2.7: "A command runs as `bash -c`": bash syntax works
    r = run_command("set -o pipefail; [[ -n x ]] && echo ${BASH_VERSION:+bash}", cwd=tmp_path,
                    env=dict(os.environ), token=CancelToken())
    assert (r.exit_code, r.stdout) == (0, "bash\n")


def test_an_enum_on_a_non_string_field_compares_the_value_text() -> None:
    # docs/language.md 2: an enum is accepted on any type (C101 warns); `n: int [enum: "1", "2"]`
    # then admits 1 and 2, and a list field's items are checked one by one
    from iterion.backends.schema import json_schema, schema_problems

    schema = Schema("s", (SchemaField("n", FieldType.INT, ("1", "2")),
                          SchemaField("tags", FieldType.STRING_LIST, ("a", "b"))))
    assert validate_output("x", schema, {"n": 2, "tags": ["a", "b", "a"]}) == {"n": 2, "tags": ["a", "b", "a"]}
    assert schema_problems(schema, {"n": 2, "tags": ["a"]}) == []
    with pytest.raises(NodeFailure, match="'n' is 3"):
        validate_output("x", schema, {"n": 3, "tags": []})
    assert schema_problems(schema, {"n": 1, "tags": ["c"]}) == ["field 'tags' must be one of a, b, got ['c']"]
    assert json_schema(schema)["properties"]["n"] == {"type": "integer", "enum": [1, 2]}


def test_a_nested_loop_gets_a_fresh_budget_each_outer_round() -> None:
    # docs/language.md 3: "The counter resets to 0 when a non-loop edge enters one of the loop's
    # entry nodes (targets of its loop edges) from outside the loop body"
    enter = Edge(0, "outer", "inner", SP)
    again = Edge(1, "inner", "inner", SP, loop="i", loop_max=2)
    leave = Edge(2, "inner", "check", SP)
    back = Edge(3, "check", "outer", SP, loop="o", loop_max=2)
    wf = _wf([enter, again, leave, back], {"i": Loop("i", 2, (1,)), "o": Loop("o", 2, (3,))})
    st = RunState("r")
    for _ in range(2):
        take_edge(again, st, {}, wf)
    take_edge(leave, st, {}, wf)
    take_edge(back, st, {}, wf)
    assert st.loops["i"].iteration == 2 and st.loops["o"].iteration == 1
    take_edge(enter, st, {}, wf)  # outer -> inner from outside the inner loop: a fresh budget
    assert st.loops["i"].iteration == 0 and st.loops["o"].iteration == 1
    take_edge(again, st, {}, wf)
    take_edge(leave, st, {}, wf)  # inner -> check does not enter a loop entry: nothing resets
    assert st.loops["i"].iteration == 1
