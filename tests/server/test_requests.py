"""The request models (iterion/requests.py): strict, one-line refusals, executor-only fields as
validators, the answers shapes, and a queue delivery built from a request giving it back."""

from __future__ import annotations

import pytest

from iterion.budget import BudgetAsk
from iterion.queue.delivery import Delivery, Kind, decode
from iterion.requests import (
    LOCAL,
    QUEUE,
    Budget,
    ControlRequest,
    LaunchRequest,
    RequestError,
    ResumeRequest,
    node_answers,
    pending_answers,
)


def _refused(model: type[LaunchRequest] | type[ResumeRequest] | type[ControlRequest], body: object,
             executor: str = LOCAL) -> str:
    with pytest.raises(RequestError) as err:
        model.parse(body, executor=executor)
    assert err.value.exit_code == 2 and "\n" not in err.value.message
    return err.value.message


def test_types_are_strict_and_refusals_name_the_field() -> None:
    assert _refused(LaunchRequest, {"file": "a.bot", "auto_merge": "false"}) == \
        "auto_merge must be true or false, got 'false'"
    assert LaunchRequest.parse({"file": "a.bot", "auto_merge": False}).launch_options([]).auto_merge is False
    assert LaunchRequest.parse({"file": "a.bot"}).launch_options([]).auto_merge is True
    assert _refused(ResumeRequest, {"force": 1}) == "force must be true or false, got 1"
    assert _refused(ResumeRequest, {"expected_version": "3"}) == "expected_version must be an integer, got '3'"
    assert _refused(LaunchRequest, {}) == "file is required: the workflow to run"
    assert _refused(LaunchRequest, {"file": "a.bot", "bogus": 1}).startswith("unknown field 'bogus' (fields: ")
    assert _refused(LaunchRequest, {"file": "a.bot", "vars": {"a": [1]}}) == \
        "vars values must be strings, numbers or booleans"
    assert _refused(LaunchRequest, {"file": "a.bot", "on_budget": "later"}) == \
        "on_budget must be 'fail' or 'pause', got 'later'"
    assert _refused(ResumeRequest, {"backend": "bogus"}).startswith("--backend: unknown backend 'bogus'")
    assert _refused(ResumeRequest, {"model": " x"}).startswith("--model: ")
    assert _refused(ControlRequest, {"wait": 61}) == "wait must be a number of seconds between 0 and 60, got 61"
    assert _refused(LaunchRequest, [1]) == "request body must be a JSON object"


def test_executor_only_fields_are_validators_with_messages() -> None:
    queued = {"file": "flows/main.bot", "repo_url": "https://example.com/app.git", "ref": "main", "request_id": "k1"}
    assert LaunchRequest.parse(queued, executor=QUEUE).repo_url == queued["repo_url"]
    assert _refused(LaunchRequest, queued) == \
        "repo_url needs a server with a queue (start it with `iterion server --nats URL`)"
    assert _refused(LaunchRequest, {"file": "a.bot", "branch_name": "b"}, QUEUE) == \
        "branch_name is not supported by a server with a queue (a runner executes the run)"
    assert _refused(ResumeRequest, {"force_stale": True}, QUEUE).startswith("force_stale is not supported")
    assert _refused(ResumeRequest, {"request_id": "k"}).startswith("request_id needs a server with a queue")
    assert _refused(LaunchRequest, {**queued, "file": "../x.bot"}, QUEUE).startswith(
        "file '../x.bot' must be a relative path inside the repository")
    assert _refused(LaunchRequest, {"file": "a.bot", "ref": "main"}, QUEUE) == \
        "ref needs repo_url: the ref of which repository?"


def test_budget_is_parsed_once_for_every_surface() -> None:
    assert Budget.from_flags(None, None, None, None, None) is None
    flags = Budget.from_flags(2.5, None, "4h", 9, None)
    wire = LaunchRequest.parse({"file": "a.bot", "budget": {"max_cost_usd": 2.5, "max_duration": "4h",
                                                            "max_iterations": 9}}).budget
    assert flags is not None and wire is not None
    assert flags.ask() == wire.ask() == BudgetAsk(max_cost_usd=2.5, max_duration_s=14400.0, max_iterations=9)
    assert Budget.from_ask(flags.ask()) is not None and Budget.from_ask(flags.ask()).ask() == flags.ask()  # type: ignore[union-attr]
    with pytest.raises(RequestError, match="--max-tokens must be an integer"):
        Budget.from_flags(None, "many", None, None, None)  # type: ignore[arg-type]


def test_answers_shapes_one_rule() -> None:
    flat, keyed = {"approved": True}, {"approve": {"approved": True}}
    assert node_answers(flat, ["approve"], "answers") == node_answers(keyed, ["approve"], "answers") == keyed
    with pytest.raises(RequestError, match="the workflow has 2 human nodes"):
        node_answers(flat, ["a", "b"], "answers")
    fields = {"approved", "note"}
    assert pending_answers(flat, "approve", fields, "answers") == pending_answers(keyed, "approve", fields, "answers")
    with pytest.raises(RequestError, match="but the run waits on approve"):
        pending_answers({"review": {"ok": True}}, "approve", fields, "answers")


def test_a_delivery_carries_the_request_unchanged() -> None:
    req = LaunchRequest.parse({"file": "flows/main.bot", "repo_url": "https://example.com/app.git", "ref": "main",
                               "vars": {"n": 3, "t": "x"}, "answers": {"approved": True}, "model": "openai/gpt-4o",
                               "budget": {"max_duration": "1h", "max_tokens": 500}, "on_budget": "pause"},
                              executor=QUEUE)
    d = decode(Delivery(kind=Kind.LAUNCH, run_id="r1", request_id="q1", **Delivery.launch_fields(req)).encode())
    back = d.launch_request()
    assert back.launch_options(["approve"]) == req.launch_options(["approve"])
    assert back.vars == {"n": "3", "t": "x"}  # stored as the engine takes them
    resume = ResumeRequest.parse({"answers": {"approve": {"approved": True}}, "force": True,
                                  "budget": {"max_cost_usd": 4}}, executor=QUEUE)
    d = decode(Delivery(kind=Kind.RESUME, run_id="r1", request_id="q2", **Delivery.resume_fields(resume)).encode())
    got = d.resume_request()
    assert got.resume_options({}) == resume.resume_options({}) and got.answers == resume.answers
