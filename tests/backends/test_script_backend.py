"""The deterministic script backend: answers by node and iteration from a JSON/YAML file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iterion import ir
from iterion.backends import BackendError, BackendRequest, get_backend
from iterion.backends.script import ScriptBackend
from iterion.failure_codes import FailureCode

VERDICT = ir.Schema("verdict", (ir.SchemaField("approved", ir.FieldType.BOOL),
                                ir.SchemaField("summary", ir.FieldType.STRING)))


def write(tmp_path: Path, data: object, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def req(node: str, iteration: int = 0, **kw: object) -> BackendRequest:
    return BackendRequest(node_id=node, iteration=iteration, **kw)  # type: ignore[arg-type]


def test_keyed_by_iteration_with_fallback_and_accounting(tmp_path: Path) -> None:
    path = write(tmp_path, {"review": {
        "0": {"output": {"approved": False, "summary": "needs work"}, "tokens_in": 120, "tokens_out": 30,
              "cost_usd": 0.01},
        "*": {"approved": True, "summary": "ok"}}})
    b = ScriptBackend({"script_file": str(path)})
    first = b.complete(req("review", 0, output_schema=VERDICT))
    assert first.output == {"approved": False, "summary": "needs work"}
    assert (first.tokens_in, first.tokens_out, first.tokens, first.cost_usd) == (120, 30, 150, 0.01)
    later = b.complete(req("review", 5, output_schema=VERDICT))
    assert later.output == {"approved": True, "summary": "ok"} and later.tokens == 0


def test_list_per_node_repeats_the_last_and_yaml_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("plan:\n  - text: step one\n  - text: step two\n'*':\n  text: anything\n"
                    "keyed:\n  0: {text: zero}\n  '*': {text: later}\n")
    b = ScriptBackend({"script_file": str(path)})
    assert b.complete(req("plan", 0)).text == "step one"
    assert b.complete(req("plan", 1)).text == "step two"
    assert b.complete(req("plan", 7)).text == "step two"
    assert b.complete(req("other")).as_output() == {"text": "anything"}
    assert b.complete(req("keyed", 0)).text == "zero"
    assert b.complete(req("keyed", 1)).text == "later"


def test_env_var_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_SCRIPT_FILE", str(write(tmp_path, {"a": {"output": {"x": 1}}})))
    assert get_backend("script", {}).complete(req("a")).output == {"x": 1}


def test_missing_file_or_answer_is_backend_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ITERION_SCRIPT_FILE", raising=False)
    with pytest.raises(BackendError, match="ITERION_SCRIPT_FILE") as info:
        ScriptBackend({}).complete(req("a"))
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE
    b = ScriptBackend({"script_file": str(write(tmp_path, {"a": {"0": {"text": "x"}}}))})
    with pytest.raises(BackendError, match="no answer for node a iteration 1"):
        b.complete(req("a", 1))
    with pytest.raises(BackendError, match="no answer for node zzz"):
        b.complete(req("zzz"))


def test_scripted_error_carries_its_code(tmp_path: Path) -> None:
    b = ScriptBackend({"script_file": str(write(tmp_path, {
        "a": {"error": {"code": "RATE_LIMITED", "message": "slow down"}}, "b": {"error": "AUTH_FAILED"}}))})
    with pytest.raises(BackendError, match="slow down") as info:
        b.complete(req("a"))
    assert info.value.code is FailureCode.RATE_LIMITED
    with pytest.raises(BackendError) as info:
        b.complete(req("b"))
    assert info.value.code is FailureCode.AUTH_FAILED


def test_attempts_survive_a_new_backend_instance(tmp_path: Path) -> None:
    path = write(tmp_path, {"flaky": {"0": {"attempts": [{"error": "TIMEOUT"}, {"output": {"ok": True}}]}}})
    with pytest.raises(BackendError) as info:
        ScriptBackend({"script_file": str(path)}).complete(req("flaky", run_id="r1"))
    assert info.value.code is FailureCode.TIMEOUT
    # the resume is a new process with a new backend: the second attempt succeeds
    assert ScriptBackend({"script_file": str(path)}).complete(req("flaky", run_id="r1")).output == {"ok": True}


def test_ask_user_then_answer(tmp_path: Path) -> None:
    b = ScriptBackend({"script_file": str(write(tmp_path, {
        "ask": {"ask_user": "Which branch?", "after_answer": {"output": {"branch": "main"}, "tokens_out": 3}}}))})
    first = b.complete(req("ask", allow_ask_user=True))
    assert first.ask_user == "Which branch?" and first.output is None
    assert first.session_id
    second = b.complete(req("ask", allow_ask_user=True, session_id=first.session_id,
                            prior_question="Which branch?", prior_answer="main"))
    assert second.ask_user is None and second.output == {"branch": "main"} and second.tokens_out == 3


def test_router_selection(tmp_path: Path) -> None:
    b = ScriptBackend({"script_file": str(write(tmp_path, {"route": {"select": "fix"}, "multi": {"select": ["a", "b"]},
                                                          "bad": {"select": "nowhere"}, "dflt": {}}))})
    assert b.complete(req("route", choices=("ship", "fix"))).selected == ("fix",)
    assert b.complete(req("multi", choices=("a", "b", "c"), multi=True)).selected == ("a", "b")
    assert b.complete(req("dflt", choices=("ship", "fix"))).selected == ("ship",)
    with pytest.raises(BackendError, match="not one of ship, fix") as info:
        b.complete(req("bad", choices=("ship", "fix")))
    assert info.value.code is FailureCode.SCHEMA_VALIDATION


def test_output_not_matching_the_schema(tmp_path: Path) -> None:
    b = ScriptBackend({"script_file": str(write(tmp_path, {"review": {"approved": "yes"}}))})
    with pytest.raises(BackendError, match="missing field 'summary'") as info:
        b.complete(req("review", output_schema=VERDICT))
    assert info.value.code is FailureCode.SCHEMA_VALIDATION
