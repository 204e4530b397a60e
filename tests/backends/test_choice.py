"""The backend resolution order (iterion/backends/choice.py, docs/language.md §2.4) as a pure
function of its arguments and an explicit environment: a developer's own credentials never
change these outcomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.backends.choice import Choice, declared_backend, detect_backend, is_auto, resolve_backend


def _claude(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "claude"
    exe.write_text("#!/bin/sh\necho '{}'\n")
    exe.chmod(0o755)
    return exe


def test_each_step_wins_over_the_ones_after_it() -> None:
    env = {"ITERION_DEFAULT_BACKEND": "openai", "ITERION_BACKEND": "claude_code", "ITERION_SCRIPT_FILE": "a.yaml",
           "ANTHROPIC_API_KEY": "k"}
    full = {"override": "script", "node_backend": "claw", "workflow_backend": "openai"}
    assert resolve_backend(env, **full) == Choice("script", "--backend")
    assert resolve_backend(env, **{**full, "override": None}, node_id="w") == Choice("claw", "node w's backend:")
    assert resolve_backend(env, workflow_backend="claude_code") == Choice(
        "claude_code", "the workflow's default_backend:")
    assert resolve_backend(env) == Choice("openai", "$ITERION_DEFAULT_BACKEND")
    assert resolve_backend({**env, "ITERION_DEFAULT_BACKEND": ""}) == Choice("claude_code", "$ITERION_BACKEND")
    assert resolve_backend({"ITERION_SCRIPT_FILE": "a.yaml", "ANTHROPIC_API_KEY": "k"}).name == "script"
    assert resolve_backend({"ANTHROPIC_API_KEY": "k"}, script_file="b.yaml") == Choice(
        "script", "a script file is given")
    assert resolve_backend({"ANTHROPIC_API_KEY": "k"}) == Choice("claw", "detected: $ANTHROPIC_API_KEY is set")
    assert resolve_backend({}) == Choice("claw", "nothing chose or detected one: the default")


@pytest.mark.parametrize("value", ["", "  ", "auto", "AUTO", " Auto ", "${UNSET}", "${EMPTY}", "${AUTO_VAL}",
                                   "${UNSET:-auto}", "$EMPTY"])
def test_empty_or_auto_after_expansion_is_skipped_at_every_step(value: str) -> None:
    env = {"EMPTY": "", "AUTO_VAL": "auto", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    assert resolve_backend(env, override=value if "$" not in value else None, node_backend=value,
                           workflow_backend=value) == Choice("claw", "detected: $OPENAI_BASE_URL is set")
    if "$" not in value:  # the variables are taken as written (no expansion of their own)
        assert resolve_backend({**env, "ITERION_DEFAULT_BACKEND": value, "ITERION_BACKEND": value}).name == "claw"


def test_expansion_and_aliases_are_kept_as_written() -> None:
    env = {"TEAM": "claude"}
    assert resolve_backend(env, node_backend="${TEAM}") == Choice("claude", "the node's backend:")
    assert resolve_backend(env, node_backend="${NOPE:-${TEAM}}").name == "claude"
    assert resolve_backend({}, node_backend="gemini").name == "gemini"  # the registry refuses it, naming the known ones


def test_detection_prefers_a_claw_credential_then_the_claude_cli(tmp_path: Path) -> None:
    exe = _claude(tmp_path / "bin")
    path = str(tmp_path / "bin")
    assert detect_backend({}) is None
    assert detect_backend({"OPENAI_API_KEY": "  ", "PATH": str(tmp_path)}) is None  # blank is unset
    assert detect_backend({"PATH": path}) == Choice("claude_code", f"detected: the claude CLI on PATH ({exe})")
    assert detect_backend({"PATH": path, "OPENAI_API_KEY": "k"}) == Choice("claw", "detected: $OPENAI_API_KEY is set")
    assert detect_backend({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}).name == "claw"  # type: ignore[union-attr]
    # $ITERION_CLAUDE_BIN: an explicit path needs no PATH; a name is looked up on the env's PATH only
    assert detect_backend({"ITERION_CLAUDE_BIN": str(exe)}) == Choice(
        "claude_code", f"detected: $ITERION_CLAUDE_BIN ({exe})")
    assert detect_backend({"ITERION_CLAUDE_BIN": "claude"}) is None
    assert detect_backend({"ITERION_CLAUDE_BIN": str(tmp_path / "missing")}) is None


def test_the_codex_cli_is_detected_after_the_claude_cli(tmp_path: Path) -> None:
    claude = _claude(tmp_path / "claude-bin")
    codex = tmp_path / "codex-bin" / "codex"
    codex.parent.mkdir()
    codex.write_text("#!/bin/sh\nexit 0\n")
    codex.chmod(0o755)
    both = f"{codex.parent}:{claude.parent}"
    assert detect_backend({"PATH": str(codex.parent)}) == Choice("codex", f"detected: the codex CLI on PATH ({codex})")
    assert detect_backend({"PATH": both}) == Choice("claude_code", f"detected: the claude CLI on PATH ({claude})")
    assert detect_backend({"PATH": str(codex.parent), "ANTHROPIC_API_KEY": "k"}).name == "claw"  # type: ignore[union-attr]
    assert detect_backend({"ITERION_CODEX_BIN": str(codex)}) == Choice("codex", f"detected: $ITERION_CODEX_BIN ({codex})")
    assert detect_backend({"ITERION_CODEX_BIN": "codex"}) is None  # a name is looked up on the env's PATH only


def test_is_auto_and_the_backend_the_source_declares() -> None:
    assert is_auto(None) and is_auto("") and is_auto("AuTo") and not is_auto("claw")
    assert declared_backend("auto", "claude_code") == "claude_code"
    assert declared_backend("", None) is None and declared_backend(None, "Auto") is None
    assert declared_backend("${B}", "claw") == "${B}"  # decided at run time
