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
                         "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    bare = run_cli("backends", "--json", env={**base, "PATH": str(empty)})
    assert bare.returncode == 0, bare.stderr
    rows = {r["name"]: r for r in json.loads(bare.stdout)}
    assert set(rows) == {"script", "openai", "claw", "claude_code"}
    assert not any(r["available"] for r in rows.values())
    assert "npm install" in rows["claude_code"]["detail"]

    script = tmp_path / "answers.yaml"
    script.write_text("'*': {text: ok}\n")
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\necho '{}'\n")
    claude.chmod(0o755)
    env = {**base, "ITERION_SCRIPT_FILE": str(script), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "ITERION_CLAUDE_BIN": str(claude)}
    configured = run_cli("backends", env=env)
    assert configured.returncode == 0, configured.stderr
    lines = configured.stdout.splitlines()
    assert len(lines) == 5 and all(line.startswith("ok ") for line in lines[:4])
    assert "$ITERION_BACKEND" in lines[4]  # then how a node's backend is chosen
