from __future__ import annotations

import pytest

from iterion.backends import BackendError, get_backend, known_backends
from iterion.backends.claude_code import ClaudeCodeBackend
from iterion.backends.claw import ClawBackend
from iterion.backends.openai import OpenAIBackend
from iterion.backends.script import ScriptBackend
from iterion.failure_codes import FailureCode


def test_known_names_and_aliases() -> None:
    assert known_backends() == ["claude_code", "claw", "codex", "openai", "script"]
    assert isinstance(get_backend("script", {}), ScriptBackend)
    assert isinstance(get_backend("openai", {"base_url": "http://127.0.0.1:9"}), OpenAIBackend)
    assert isinstance(get_backend("claude", {}), ClaudeCodeBackend)


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(BackendError, match="unknown backend 'gemini'; known backends: claude_code, claw, codex, openai, script") as info:
        get_backend("gemini", {})
    assert info.value.code is FailureCode.BACKEND_UNAVAILABLE


def test_default_follows_the_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_backend(None)``: the environment's steps of the order (iterion/backends/choice.py)."""
    for var in ("ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_SCRIPT_FILE", "ITERION_CLAUDE_BIN", "ITERION_CODEX_BIN",
                "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", "")
    assert isinstance(get_backend(None, {}), ClawBackend)  # nothing chosen or detected
    monkeypatch.setenv("ITERION_SCRIPT_FILE", "answers.yaml")
    assert isinstance(get_backend(None, {}), ScriptBackend)
    monkeypatch.setenv("ITERION_BACKEND", "openai")
    assert isinstance(get_backend(None, {}), OpenAIBackend)
    monkeypatch.setenv("ITERION_DEFAULT_BACKEND", "claude")  # wins over the older variable; aliases apply
    assert isinstance(get_backend(None, {}), ClaudeCodeBackend)
