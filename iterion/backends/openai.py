"""The ``openai`` backend: any OpenAI-compatible chat-completions endpoint, over httpx.

Configuration: ``options["base_url"]`` / ``$OPENAI_BASE_URL`` (default the OpenAI API),
``options["api_key"]`` / ``$OPENAI_API_KEY`` (required only for the default URL),
``options["json_mode"]`` / ``$ITERION_JSON_MODE``: how a schema'd answer is asked for
(``iterion.backends.jsonout``: ``auto``, the default, is ``json_schema`` falling back to llama.cpp's
``json_object`` + ``schema`` form when the endpoint refuses it), ``options["timeout_s"]``.
Tokens come from the response's ``usage``; cost from ``usage.cost`` when the endpoint reports it,
else from the maintained price data (``pricing.py``; cached prompt tokens at their own rate).

Tools are not executed by this backend (it makes one completion per call).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from iterion.backends.base import Backend, BackendError, BackendRequest, BackendResponse, call_timeout_s
from iterion.backends.httperrors import post_json
from iterion.backends.jsonout import Fallback, json_mode, response_format, token_limit_field
from iterion.backends.pricing import cost_usd
from iterion.backends.schema import (
    effective_schema,
    finish_structured,
    json_schema,
    output_instructions,
    prior_exchange,
)
from iterion.failure_codes import FailureCode

if TYPE_CHECKING:  # httpx is imported when a request is made: listing backends or runs does not pay for it
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"
def cached_tokens(usage: dict[str, Any]) -> int:
    """The prompt tokens served from the provider's cache (OpenAI counts them inside prompt_tokens)."""
    details = usage.get("prompt_tokens_details")
    try:
        return int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    except (TypeError, ValueError):
        return 0


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self.base_url = str(self.options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self.api_key = self.options.get("api_key") or os.environ.get("OPENAI_API_KEY")
        self._json: Fallback | None = None
        self._client: httpx.Client | None = None

    @property
    def timeout_s(self) -> float:
        """The call's limit, read at use (BackendError on a garbage $ITERION_OPENAI_TIMEOUT)."""
        return call_timeout_s(self.options)

    def availability(self) -> tuple[bool, str]:
        try:
            self.timeout_s  # noqa: B018 - a garbage setting is "not configured"
        except BackendError as exc:
            return False, exc.message
        if self.base_url.rstrip("/") == DEFAULT_BASE_URL and not self.api_key:
            return False, "no $OPENAI_API_KEY (or $OPENAI_BASE_URL for a compatible endpoint)"
        return True, f"{self.base_url} ({'with' if self.api_key else 'without'} an API key)"

    @property
    def json_mode(self) -> str:
        return self.json_fallback().current()

    @json_mode.setter
    def json_mode(self, mode: str) -> None:
        self._json = Fallback(json_mode({"json_mode": mode}))

    def json_fallback(self) -> Fallback:
        """The JSON-output mode, read at first use (a garbage setting fails the node naming it)."""
        if self._json is None:
            self._json = Fallback(json_mode(self.options))
        return self._json

    def _http(self) -> httpx.Client:
        import httpx

        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.Client(base_url=self.base_url.rstrip("/") + "/", headers=headers,
                                        timeout=self.timeout_s)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def build_body(self, request: BackendRequest) -> dict[str, Any]:
        if not request.model:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               f"node {request.node_id}: the openai backend needs a model (set `model:` on the node)")
        system = "\n\n".join(p for p in (request.system, output_instructions(request)) if p)
        messages: list[dict[str, str]] = []
        if system:
            messages.append({"role": "system", "content": system})
        exchange = prior_exchange(request)
        user = "\n\n".join(p for p in (request.user, exchange) if p)
        messages.append({"role": "user", "content": user})
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.max_tokens:
            body[token_limit_field(self.base_url, request.model)] = request.max_tokens
        if request.reasoning_effort:
            body["reasoning_effort"] = request.reasoning_effort
        schema = effective_schema(request)
        if schema is not None:
            # an answer that may be an `{"_ask_user": ...}` question cannot be held to the schema
            mode = "json_object" if request.allow_ask_user else self.json_mode
            body["response_format"] = response_format(mode, schema.name, json_schema(schema))
        return body

    def _exchange(self, body: dict[str, Any], timeout: float, request: BackendRequest) -> dict[str, Any]:
        """The completion, streamed (``iterion.backends.sse``: progress on the timeline, the
        limit on silence, a cut answer kept) unless $ITERION_STREAM=0."""
        from iterion.backends.sse import (
            OpenAIStream,
            Progress,
            fold_stream,
            json_body,
            post_stream,
            streaming_enabled,
        )

        if not streaming_enabled():
            resp = post_json(self._http(), "chat/completions", body, timeout=timeout, where=self.base_url)
            return json_body(resp, self.base_url)
        host = request.host
        fold = OpenAIStream(Progress(getattr(host, "emit", None), getattr(host, "check", None)))
        return fold_stream(fold, lambda: post_stream(
            self._http(), "chat/completions", {**body, "stream": True, "stream_options": {"include_usage": True}},
            timeout=timeout, where=self.base_url, credential="$OPENAI_API_KEY", on_data=fold), self.base_url)

    def complete(self, request: BackendRequest) -> BackendResponse:
        if self.base_url.rstrip("/") == DEFAULT_BASE_URL and not self.api_key:
            raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                               "the openai backend needs $OPENAI_API_KEY (or $OPENAI_BASE_URL for a compatible "
                               "endpoint that needs no key)")

        timeout = request.timeout_s or self.timeout_s
        while True:
            body = self.build_body(request)
            try:
                data = self._exchange(body, timeout, request)
                break
            except BackendError as exc:
                if "response_format" in body and self.json_fallback().should_retry(exc):
                    continue  # the endpoint refused json_schema: ask again in llama.cpp's form
                raise
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise BackendError(FailureCode.EXECUTION_FAILED,
                               f"{self.base_url} answered with no chat completion: {str(data)[:200]!r}") from None
        usage = data.get("usage") or {}
        tin, tout = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cost = usage.get("cost")
        spent = float(cost) if isinstance(cost, (int, float)) else cost_usd(request.model, tin, tout,
                                                                             cache_read=cached_tokens(usage))
        if choice.get("finish_reason") == "length" and effective_schema(request) is not None:
            raise BackendError(FailureCode.SCHEMA_VALIDATION, f"node {request.node_id}: the answer was cut at "
                               "max_tokens before the JSON closed").with_usage(tin, tout, spent)
        try:
            output, ask, selected = finish_structured(request, text)
        except BackendError as exc:
            raise exc.with_usage(tin, tout, spent) from None
        return BackendResponse(output=output, text=text, tokens_in=tin, tokens_out=tout, cost_usd=spent,
                               session_id=None, ask_user=ask, selected=selected,
                               raw={"id": data.get("id"), "model": data.get("model"),
                                    "finish_reason": choice.get("finish_reason")})
