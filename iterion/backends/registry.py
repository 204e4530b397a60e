"""Backend lookup by name: ``get_backend("script", options)``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from iterion.backends.base import Backend, BackendError
from iterion.failure_codes import FailureCode


def _lazy(module: str, cls: str) -> Callable[[Mapping[str, Any] | None], Backend]:
    """A factory that imports its backend on first use: httpx and the SDKs stay out of CLI start-up."""
    def make(options: Mapping[str, Any] | None) -> Backend:
        import importlib

        backend: Backend = getattr(importlib.import_module(module), cls)(options)
        return backend

    return make


_FACTORIES: dict[str, Callable[[Mapping[str, Any] | None], Backend]] = {
    "script": _lazy("iterion.backends.script", "ScriptBackend"),
    "openai": _lazy("iterion.backends.openai", "OpenAIBackend"),
    "claude_code": _lazy("iterion.backends.claude_code", "ClaudeCodeBackend"),
    "codex": _lazy("iterion.backends.codex", "CodexBackend"),
    "claw": _lazy("iterion.backends.claw", "ClawBackend"),
}
# spellings people use for the same backend
_ALIASES = {"claude": "claude_code", "claude-code": "claude_code", "openai_compat": "openai"}


def known_backends() -> list[str]:
    return sorted(_FACTORIES)


def canonical_or_none(name: str) -> str | None:
    """The registered name for ``name`` (aliases resolved), or None when no backend has it."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    return key if key in _FACTORIES else None


def canonical_name(name: str) -> str:
    """The registered name for ``name`` (aliases resolved), or BackendError listing the known ones."""
    key = canonical_or_none(name)
    if key is None:
        raise BackendError(FailureCode.BACKEND_UNAVAILABLE,
                           f"unknown backend {name!r}; known backends: {', '.join(known_backends())}")
    return key


def default_backend_name() -> str:
    """The backend a node that names none runs on here, outside any workflow: the environment's
    steps of the one resolution order (iterion/backends/choice.py)."""
    from iterion.backends.choice import resolve_backend

    return resolve_backend(os.environ).name


def get_backend(name: str | None, options: Mapping[str, Any] | None = None) -> Backend:
    """A backend instance; ``None`` means the default (see default_backend_name)."""
    return _FACTORIES[canonical_name(name or default_backend_name())](options)


def register_backend(name: str, factory: Callable[[Mapping[str, Any] | None], Backend]) -> None:
    """Add a backend (tests, plugins). The name must not already be taken."""
    if name in _FACTORIES:
        raise ValueError(f"backend {name!r} is already registered")
    _FACTORIES[name] = factory
