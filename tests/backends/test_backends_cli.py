"""`iterion backends`: a real subprocess of the CLI, with and without each backend configured."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import run_cli


def test_lists_what_is_missing_then_what_is_configured(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ITERION_SCRIPT_FILE", "ITERION_CLAUDE_BIN",
                         "ITERION_CODEX_BIN", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ITERION_BACKEND", "ITERION_DEFAULT_BACKEND")}
    bare = run_cli("backends", "--json", env={**base, "PATH": str(empty)})
    assert bare.returncode == 0, bare.stderr
    data = json.loads(bare.stdout)
    rows = {r["name"]: r for r in data}
    assert set(rows) == {"script", "openai", "claw", "claude_code", "codex"}
    assert not any(r["available"] for r in rows.values())
    assert "npm install" in rows["claude_code"]["detail"]
    assert "npm install -g @openai/codex" in rows["codex"]["detail"]
    # nothing configured, nothing detected: the last step of the order
    assert [r["name"] for r in data if r["default"]] == ["claw"] and "default" in rows["claw"]["chosen_by"]
    assert all("chosen_by" not in r for r in data if not r["default"])

    script = tmp_path / "answers.yaml"
    script.write_text("'*': {text: ok}\n")
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\necho '{}'\n")
    claude.chmod(0o755)
    env = {**base, "ITERION_SCRIPT_FILE": str(script), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "ITERION_CLAUDE_BIN": str(claude), "ITERION_CODEX_BIN": str(claude)}
    configured = run_cli("backends", env=env)
    assert configured.returncode == 0, configured.stderr
    lines = configured.stdout.splitlines()
    assert len(lines) == 7 and all(line.startswith("ok ") for line in lines[:5])
    assert "$ITERION_BACKEND" in lines[5]  # then how a node's backend is chosen
    assert lines[6].endswith("script ($ITERION_SCRIPT_FILE is set)")  # and what that gives here


def test_the_default_here_follows_the_environment(tmp_path: Path) -> None:
    """Which backend a node naming none runs on, and why: the variables win over detection, a
    claw credential over the claude CLI, the CLI over the final claw."""
    empty = tmp_path / "empty"
    empty.mkdir()
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text("#!/bin/sh\necho '{}'\n")
    claude.chmod(0o755)
    codex = tmp_path / "codexbin" / "codex"
    codex.parent.mkdir()
    codex.write_text("#!/bin/sh\nexit 0\n")
    codex.chmod(0o755)
    base: dict[str, str | None] = {k: None for k in (
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "ITERION_SCRIPT_FILE", "ITERION_CLAUDE_BIN", "ITERION_CODEX_BIN",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL", "ITERION_BACKEND", "ITERION_DEFAULT_BACKEND")}

    def default(**env: str) -> dict[str, str]:
        proc = run_cli("backends", "--json", env={**base, "PATH": str(empty), **env})
        assert proc.returncode == 0, proc.stderr
        (row,) = [r for r in json.loads(proc.stdout) if r["default"]]
        return {"name": row["name"], "source": row["chosen_by"]}

    assert default(PATH=str(claude.parent)) == {
        "name": "claude_code", "source": f"detected: the claude CLI on PATH ({claude})"}
    # the codex CLI is detected after the claude CLI, so a host that had claude keeps it
    assert default(PATH=str(codex.parent)) == {"name": "codex", "source": f"detected: the codex CLI on PATH ({codex})"}
    assert default(PATH=os.pathsep.join((str(codex.parent), str(claude.parent))))["name"] == "claude_code"
    assert default(PATH=str(claude.parent), ANTHROPIC_API_KEY="k")["source"] == "detected: $ANTHROPIC_API_KEY is set"
    assert default(ANTHROPIC_API_KEY="k", ITERION_DEFAULT_BACKEND="claude_code") == {
        "name": "claude_code", "source": "$ITERION_DEFAULT_BACKEND"}
    # "auto" in the variable leaves the choice to the next steps; the older variable comes next
    assert default(ITERION_DEFAULT_BACKEND="AUTO", ITERION_BACKEND="openai") == {
        "name": "openai", "source": "$ITERION_BACKEND"}
    assert default(ITERION_DEFAULT_BACKEND="claw", ITERION_BACKEND="openai")["name"] == "claw"


def test_a_default_naming_no_backend_flags_no_row_and_the_text_says_which(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ITERION_", "OPENAI_", "ANTHROPIC_"))}
    env["ITERION_DEFAULT_BACKEND"] = "gemini"
    listed = run_cli("backends", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert not [r for r in json.loads(listed.stdout) if r["default"]]
    text = run_cli("backends", env=env)
    assert text.stdout.splitlines()[-1].endswith("gemini ($ITERION_DEFAULT_BACKEND)")


def test_a_default_from_the_environment_prints_on_one_line_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ITERION_", "OPENAI_", "ANTHROPIC_"))}
    env["ITERION_DEFAULT_BACKEND"] = "a\nb [bold]$(x)[/bold]"
    text = run_cli("backends", env=env)
    assert text.returncode == 0, text.stderr
    last = text.stdout.splitlines()[-1]
    assert last.startswith("default here") and "[bold]$(x)[/bold]" in last and last.endswith("($ITERION_DEFAULT_BACKEND)")
