"""Request bodies checked against the official SDKs' request types (``openai``'s
``CompletionCreateParams``, ``anthropic``'s ``MessageCreateParams``): the TypedDicts the SDKs
send, validated with pydantic. The SDKs are test dependencies only: iterion speaks httpx.

The SDK types are lenient where a server is not (an assistant ``content`` may be null there, and
llama.cpp's server refuses it); ``check_*`` adds what real servers were seen to require.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from pydantic import TypeAdapter


def _drain(value: Any) -> Any:
    """Consume pydantic's lazy iterators (an ``Iterable[...]`` field is validated as it is read)."""
    if isinstance(value, dict):
        return {k: _drain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_drain(v) for v in value]
    if isinstance(value, Iterator):
        return [_drain(v) for v in value]
    return value


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    # kept alive: the lazy iterators it returns validate through it when read
    return TypeAdapter(kind)


def _validate(kind: Any, body: dict[str, Any]) -> None:
    keys = set(kind.__required_keys__) | set(kind.__optional_keys__)
    unknown = set(body) - keys
    assert not unknown, f"keys the SDK's {kind.__name__} does not have: {sorted(unknown)}"
    _drain(_adapter(kind).validate_python(body))


def check_openai(body: dict[str, Any]) -> None:
    from openai.types.chat import completion_create_params as p

    _validate(p.CompletionCreateParamsStreaming if body.get("stream") else p.CompletionCreateParamsNonStreaming,
              body)
    for m in body["messages"]:
        assert isinstance(m.get("content"), str), f"content must be a string (llama.cpp refuses null): {m}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            assert all(c["type"] == "function" for c in m["tool_calls"])
    if "tools" in body:
        assert body["tools"], "tools: [] is refused by some servers: omit the key instead"


def check_anthropic(body: dict[str, Any]) -> None:
    from anthropic.types import message_create_params as p

    _validate(p.MessageCreateParamsStreaming if body.get("stream") else p.MessageCreateParamsNonStreaming, body)
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False)), f"roles must alternate: {roles}"


def check(path: str, body: dict[str, Any]) -> None:
    (check_anthropic if path.rstrip("/").endswith("/messages") else check_openai)(body)
