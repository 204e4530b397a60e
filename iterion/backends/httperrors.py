"""The one mapping of an HTTP exchange's failures to typed ``BackendError``s, shared by the
``openai`` backend, its streaming reader (``iterion.backends.sse``) and the claw backend: a
transport failure, a timeout, a non-2xx answer (rate limit, credential, context length, a
request the provider refuses, a server error).

Below all three (none imports them), so the streaming reader and the backend need not import
each other. httpx is imported when a request is made: listing backends or runs does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iterion.backends.base import BackendError
from iterion.failure_codes import FailureCode

if TYPE_CHECKING:
    import httpx

# a 4xx that a later identical request may pass (timeout, conflict, too early); every other 4xx
# refuses the request itself (REQUEST_REJECTED, deterministic)
_TRANSIENT_4XX = (408, 409, 425)
# a 500 whose body is a request-validation error (pydantic's and FastAPI's wording, OpenAI's type)
_VALIDATION_MARKERS = ("validation error", "literal_error", "invalid_request_error", "'loc': ('body'",
                       "unprocessable entity", "field required")
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "context window", "too many tokens",
                    "prompt is too long")


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return float(resp.headers.get("retry-after", ""))
    except ValueError:
        return None


def _error_text(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:300]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return " ".join(str(err.get(k)) for k in ("code", "type", "message") if err.get(k))
    return str(err or body)[:300]


def classify_http(resp: httpx.Response, credential: str = "$OPENAI_API_KEY") -> BackendError:
    """The failure code of a non-2xx response (chat completions, and the claw backend's
    Anthropic messages too: both carry ``{"error": {"type"/"code", "message"}}``)."""
    status, text = resp.status_code, _error_text(resp)
    lowered = text.lower()
    if status == 429:
        return BackendError(FailureCode.RATE_LIMITED, f"HTTP 429 from the provider: {text}",
                            retry_after_s=_retry_after(resp))
    if status in (401, 403):
        return BackendError(FailureCode.AUTH_FAILED,
                            f"HTTP {status}: the provider rejected the credential ({credential}): {text}")
    if any(m in lowered for m in _CONTEXT_MARKERS):
        return BackendError(FailureCode.CONTEXT_LENGTH_EXCEEDED, f"HTTP {status}: {text}")
    if status >= 500:
        if any(m in lowered for m in _VALIDATION_MARKERS):
            # a server that answers a malformed request with a 500 (llama.cpp's server): the same
            # body is refused again, so it is not retried
            return BackendError(FailureCode.REQUEST_REJECTED,
                                f"HTTP {status}: the provider refused the request as invalid: {text}")
        return BackendError(FailureCode.EXECUTION_FAILED, f"HTTP {status} from the provider: {text}")
    if status in _TRANSIENT_4XX:
        return BackendError(FailureCode.EXECUTION_FAILED, f"HTTP {status} from the provider: {text}")
    return BackendError(FailureCode.REQUEST_REJECTED, f"HTTP {status}: the provider refused the request: {text}")


def post_json(client: httpx.Client, path: str, body: dict[str, Any], *, timeout: float, where: str,
              credential: str = "$OPENAI_API_KEY") -> httpx.Response:
    """POST ``body``; a transport failure or a non-2xx answer becomes its typed BackendError
    (the one mapping the openai and claw backends share)."""
    import httpx  # imported when a request is made: listing runs or backends does not pay for it

    try:
        resp = client.post(path, json=body, timeout=timeout)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        # nothing was sent: safe to retry
        raise BackendError(FailureCode.NETWORK_TRANSIENT, f"cannot reach {where}: {exc}") from None
    except httpx.TimeoutException as exc:
        raise BackendError(FailureCode.TIMEOUT, f"{where} did not answer within {timeout:g}s: "
                                                f"{type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        raise BackendError(FailureCode.EXECUTION_FAILED, f"request to {where} failed: {exc}") from None
    if resp.status_code >= 400:
        raise classify_http(resp, credential)
    return resp
