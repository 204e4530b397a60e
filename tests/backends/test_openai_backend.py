"""The openai backend against a real HTTP server of the test's own on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from iterion import ir
from iterion.backends import BackendError, BackendRequest, get_backend
from iterion.backends.openai import OpenAIBackend
from iterion.failure_codes import FailureCode

from .fake_openai import FakeOpenAI, Reply, completion

VERDICT = ir.Schema("verdict", (ir.SchemaField("approved", ir.FieldType.BOOL),
                                ir.SchemaField("summary", ir.FieldType.STRING)))


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as s:
        yield s


@pytest.fixture
def backend(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIBackend]:
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("ITERION_MODEL_PRICES", raising=False)
    b = get_backend("openai", {})
    assert isinstance(b, OpenAIBackend)
    yield b
    b.close()


def req(**kw: object) -> BackendRequest:
    base: dict[str, object] = {"node_id": "review", "model": "gpt-4o-mini", "system": "You review.", "user": "Review it."}
    return BackendRequest(**{**base, **kw})  # type: ignore[arg-type]


def test_structured_output_tokens_and_cost(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    server.replies.append(Reply(body=completion('{"approved": true, "summary": "fine"}',
                                                prompt_tokens=1_000_000, completion_tokens=1_000_000)))
    resp = backend.complete(req(output_schema=VERDICT, max_tokens=500, reasoning_effort="low"))
    assert resp.output == {"approved": True, "summary": "fine"}
    assert (resp.tokens_in, resp.tokens_out) == (1_000_000, 1_000_000)
    assert resp.cost_usd == pytest.approx(0.15 + 0.60)  # the gpt-4o-mini row of the price table
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "gpt-4o-mini" and body["max_tokens"] == 500 and body["reasoning_effort"] == "low"
    fmt = body["response_format"]  # json_mode auto: structured outputs first
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "verdict" and fmt["json_schema"]["strict"]
    assert body["messages"][0]["role"] == "system" and '"approved"' in body["messages"][0]["content"]
    assert body["messages"][1] == {"role": "user", "content": "Review it."}


def test_reported_cost_and_env_prices(server: FakeOpenAI, backend: OpenAIBackend,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    server.replies.append(Reply(body=completion("plain text", cost=0.42)))
    resp = backend.complete(req())
    assert resp.output is None and resp.text == "plain text" and resp.cost_usd == 0.42
    monkeypatch.setenv("ITERION_MODEL_PRICES", json.dumps({"my-model": [2, 4]}))
    server.replies.append(Reply(body=completion("x", prompt_tokens=500_000, completion_tokens=250_000)))
    assert backend.complete(req(model="my-model")).cost_usd == pytest.approx(1.0 + 1.0)


def test_json_schema_mode(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    backend.json_mode = "json_schema"
    server.replies.append(Reply(body=completion('```json\n{"approved": false, "summary": "no"}\n```')))
    resp = backend.complete(req(output_schema=VERDICT))
    assert resp.output == {"approved": False, "summary": "no"}
    fmt = server.requests[0]["body"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["approved", "summary"]


@pytest.mark.parametrize("status,body,code", [
    (429, {"error": {"message": "Rate limit reached"}}, FailureCode.RATE_LIMITED),
    (401, {"error": {"message": "Incorrect API key"}}, FailureCode.AUTH_FAILED),
    (403, {"error": {"message": "forbidden"}}, FailureCode.AUTH_FAILED),
    (500, {"error": {"message": "boom"}}, FailureCode.EXECUTION_FAILED),
    (503, {"error": {"message": "overloaded"}}, FailureCode.EXECUTION_FAILED),
    (400, {"error": {"code": "context_length_exceeded", "message": "This model's maximum context length is 8192"}},
     FailureCode.CONTEXT_LENGTH_EXCEEDED),
])
def test_http_errors_are_typed(server: FakeOpenAI, backend: OpenAIBackend, status: int, body: object,
                               code: FailureCode) -> None:
    server.replies.append(Reply(status=status, body=body, headers={"retry-after": "7"} if status == 429 else {}))
    with pytest.raises(BackendError) as info:
        backend.complete(req())
    assert info.value.code is code
    assert f"HTTP {status}" in info.value.message
    if status == 429:
        assert info.value.retry_after_s == 7


def test_connect_refused_is_network_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = OpenAIBackend({"base_url": f"http://127.0.0.1:{port}/v1", "api_key": "k"})
    with pytest.raises(BackendError, match="cannot reach") as info:
        b.complete(req())
    assert info.value.code is FailureCode.NETWORK_TRANSIENT


def test_timeout(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    server.replies.append(Reply(body=completion("late"), delay_s=2.0))
    with pytest.raises(BackendError) as info:
        backend.complete(req(timeout_s=0.3))
    assert info.value.code is FailureCode.TIMEOUT


def test_invalid_json_is_schema_validation_and_still_charged(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    server.replies.append(Reply(body=completion("I think it is fine.", prompt_tokens=10, completion_tokens=5)))
    with pytest.raises(BackendError) as info:
        backend.complete(req(output_schema=VERDICT))
    assert info.value.code is FailureCode.SCHEMA_VALIDATION
    assert (info.value.tokens_in, info.value.tokens_out) == (10, 5)
    server.replies.append(Reply(body=completion('{"approved": "yes"}')))
    with pytest.raises(BackendError, match="missing field 'summary'"):
        backend.complete(req(output_schema=VERDICT))


def test_ask_user_and_prior_answer(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    server.replies.append(Reply(body=completion('{"_ask_user": "Which file?"}')))
    resp = backend.complete(req(output_schema=VERDICT, allow_ask_user=True))
    assert resp.ask_user == "Which file?" and resp.output is None
    assert "_ask_user" in server.requests[0]["body"]["messages"][0]["content"]
    server.replies.append(Reply(body=completion('{"approved": true, "summary": "README"}')))
    resp = backend.complete(req(output_schema=VERDICT, allow_ask_user=True, prior_question="Which file?",
                                prior_answer="README.md"))
    assert resp.output == {"approved": True, "summary": "README"}
    user = server.requests[1]["body"]["messages"][1]["content"]
    assert "Which file?" in user and "README.md" in user


def test_llm_router_choice(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    server.replies.append(Reply(body=completion('{"target": "fix"}')))
    assert backend.complete(req(choices=("ship", "fix"))).selected == ("fix",)
    server.replies.append(Reply(body=completion('{"target": "elsewhere"}')))
    with pytest.raises(BackendError) as info:
        backend.complete(req(choices=("ship", "fix")))
    assert info.value.code is FailureCode.SCHEMA_VALIDATION


def test_default_endpoint_without_key_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY") as info:
        OpenAIBackend({}).complete(req())
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE


def test_the_environment_timeout_is_read_at_use(server: FakeOpenAI, backend: OpenAIBackend,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """$ITERION_OPENAI_TIMEOUT set after the backend was built is the limit of its next call."""
    monkeypatch.setenv("ITERION_OPENAI_TIMEOUT", "0.3")
    server.replies.append(Reply(body=completion("late"), delay_s=2.0))
    with pytest.raises(BackendError, match=r"silent for 0\.3s") as info:
        backend.complete(req())
    assert info.value.code is FailureCode.TIMEOUT
    monkeypatch.setenv("ITERION_OPENAI_TIMEOUT", "soon")
    with pytest.raises(BackendError, match=r"\$ITERION_OPENAI_TIMEOUT='soon' is not a number of seconds") as info:
        backend.complete(req())
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE and len(server.requests) == 1


def test_request_bodies_match_the_sdk_type(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    from tests.claw.sdk_shapes import check_openai

    for request in (req(), req(output_schema=VERDICT, max_tokens=9), req(output_schema=VERDICT, allow_ask_user=True,
                                                                         prior_question="Which?", prior_answer="b")):
        check_openai(backend.build_body(request))
    assert backend.build_body(req(output_schema=VERDICT, allow_ask_user=True))["response_format"] == {
        "type": "json_object"}  # an `_ask_user` answer is not held to the schema
    # what goes on the wire is the streamed form (stream, stream_options): checked as sent
    server.replies.append(Reply(body=completion('{"approved": true, "summary": "ok"}')))
    backend.complete(req(output_schema=VERDICT))
    sent = server.requests[-1]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    check_openai(sent)


LLAMA_CPP_REFUSAL = {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                               "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}",
                               "type": "internal_server_error"}}


def test_json_schema_refused_falls_back_to_the_llama_cpp_form(server: FakeOpenAI, backend: OpenAIBackend) -> None:
    server.replies.append(Reply(status=500, body=LLAMA_CPP_REFUSAL))
    server.replies.append(Reply(body=completion('{"approved": true, "summary": "ok"}')))
    server.replies.append(Reply(body=completion('{"approved": false, "summary": "no"}')))
    assert backend.complete(req(output_schema=VERDICT)).output == {"approved": True, "summary": "ok"}
    assert backend.complete(req(output_schema=VERDICT)).output == {"approved": False, "summary": "no"}
    formats = [r["body"]["response_format"] for r in server.requests]
    assert formats[0]["type"] == "json_schema"
    assert formats[1] == formats[2] == {"type": "json_object", "schema": formats[0]["json_schema"]["schema"]}


@pytest.mark.parametrize("status,body", [
    (400, {"error": {"type": "invalid_request_error", "message": "Unsupported parameter: 'max_tokens'"}}),
    (404, {"error": {"message": "The model `nope` does not exist"}}),
    (422, {"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}),
    (500, LLAMA_CPP_REFUSAL),
])
def test_requests_that_can_never_succeed_are_deterministic(server: FakeOpenAI, backend: OpenAIBackend, status: int,
                                                           body: object) -> None:
    from iterion.failure_codes import TABLE, Retry

    backend.json_mode = "json_schema"  # no fallback: the refusal is the answer
    server.replies.append(Reply(status=status, body=body))
    with pytest.raises(BackendError) as info:
        backend.complete(req(output_schema=VERDICT))
    assert info.value.code is FailureCode.REQUEST_REJECTED
    assert TABLE[info.value.code].retry is Retry.DETERMINISTIC and TABLE[info.value.code].in_run_retries == 0
    assert len(server.requests) == 1


def test_garbage_json_mode_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITERION_JSON_MODE", "yaml")
    with pytest.raises(BackendError, match=r"\$ITERION_JSON_MODE is 'yaml'; use one of auto, json_schema"):
        OpenAIBackend({"base_url": "http://127.0.0.1:9/v1"}).build_body(req(output_schema=VERDICT))
