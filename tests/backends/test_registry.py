from __future__ import annotations

import pytest

from iterion.backends import BackendError, get_backend, known_backends
from iterion.backends.claude_code import ClaudeCodeBackend
from iterion.backends.openai import OpenAIBackend
from iterion.backends.script import ScriptBackend
from iterion.failure_codes import FailureCode


def test_known_names_and_aliases() -> None:
    assert known_backends() == ["claude_code", "claw", "openai", "script"]
    assert isinstance(get_backend("script", {}), ScriptBackend)
    assert isinstance(get_backend("openai", {"base_url": "http://127.0.0.1:9"}), OpenAIBackend)
    assert isinstance(get_backend("claude", {}), ClaudeCodeBackend)


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(BackendError, match="unknown backend 'gemini'; known backends: claude_code, claw, openai, script") as info:
        get_backend("gemini", {})
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE


def test_default_is_script_unless_the_environment_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ITERION_BACKEND", raising=False)
    assert isinstance(get_backend(None, {}), ScriptBackend)
    monkeypatch.setenv("ITERION_BACKEND", "openai")
    assert isinstance(get_backend(None, {}), OpenAIBackend)
