"""How an OpenAI-compatible request asks for JSON output, and which token-limit field it uses: the
one home of both choices for the ``openai`` backend and the claw agent's chat-completions wire.

JSON output modes (``options["json_mode"]``, else ``$ITERION_JSON_MODE``, else the older
``$ITERION_OPENAI_JSON_MODE``):

* ``auto`` (default): ``json_schema`` first; when the endpoint refuses it with an answer that names
  ``response_format`` (llama.cpp's server: a 500 whose body is a validation error on
  ``response_format.type``), ``json_object_schema`` from then on (``Fallback``);
* ``json_schema``: OpenAI structured outputs, ``{"type": "json_schema", "json_schema": {...}}``;
* ``json_object_schema``: llama.cpp's compatibility form, ``{"type": "json_object", "schema": ...}``
  (the server turns the schema into a grammar);
* ``json_object``: plain JSON mode, no schema (the widest support; the schema is only in the prompt).

Token limit: the OpenAI API refuses ``max_tokens`` for its reasoning models (o1, o3, o4, gpt-5) and
has deprecated it for all, so requests to it carry ``max_completion_tokens``; compatible servers
(llama.cpp, Ollama, vLLM, LM Studio) are sent ``max_tokens``, which llama.cpp's server alone knows
(it ignores ``max_completion_tokens``). A reasoning model's name gets ``max_completion_tokens``
wherever it is served.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from iterion.backends.base import BackendError
from iterion.failure_codes import FailureCode

MODE_ENV = "ITERION_JSON_MODE"
LEGACY_MODE_ENV = "ITERION_OPENAI_JSON_MODE"
MODES = ("auto", "json_schema", "json_object_schema", "json_object")
OPENAI_API_URL = "https://api.openai.com/v1"
_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


def json_mode(options: Mapping[str, Any]) -> str:
    """The configured mode; a value not in MODES fails the node naming where it came from."""
    for where, value in (("the backend option json_mode", options.get("json_mode")),
                         (f"${MODE_ENV}", os.environ.get(MODE_ENV)),
                         (f"${LEGACY_MODE_ENV}", os.environ.get(LEGACY_MODE_ENV))):
        if value:
            mode = str(value).strip().lower()
            if mode not in MODES:
                raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                                   f"{where} is {value!r}; use one of {', '.join(MODES)}")
            return mode
    return "auto"


def response_format(mode: str, name: str, schema: dict[str, Any], *, strict: bool = True) -> dict[str, Any]:
    """The ``response_format`` of a request answered in JSON matching ``schema`` (``mode`` resolved:
    ``auto`` asks as ``json_schema``)."""
    if mode in ("auto", "json_schema"):
        return {"type": "json_schema", "json_schema": {"name": _schema_name(name), "schema": schema,
                                                       "strict": strict}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def _schema_name(name: str) -> str:
    # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
    return (re.sub(r"[^a-zA-Z0-9_-]", "_", name) or "output")[:64]


def names_response_format(exc: BackendError) -> bool:
    """Did the endpoint refuse the request because of its ``response_format`` (the answer that
    makes ``auto`` fall back to llama.cpp's form)?"""
    return exc.code is FailureCode.REQUEST_REJECTED and ("response_format" in exc.message
                                                         or "json_schema" in exc.message)


class Fallback:
    """The mode one backend instance uses, moving from ``auto`` to ``json_object_schema`` once an
    endpoint refused ``json_schema`` (remembered, so later calls do not repeat the refusal)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.fell_back = False

    def current(self) -> str:
        return "json_object_schema" if self.fell_back else self.mode

    def should_retry(self, exc: BackendError) -> bool:
        if self.mode == "auto" and not self.fell_back and names_response_format(exc):
            self.fell_back = True
            return True
        return False


def token_limit_field(base_url: str, model: str) -> str:
    """``max_completion_tokens`` for the OpenAI API and for reasoning models, else ``max_tokens``."""
    if base_url.rstrip("/") == OPENAI_API_URL or _REASONING.match(model.rpartition("/")[2]):
        return "max_completion_tokens"
    return "max_tokens"
