"""The claw agent through the real CLI: the README's demo command, --permission* on run and
resume, and a malformed rule refused before anything exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..conftest import REPO_ROOT, iterion_cmd, run_cli, store_fingerprint
from .conftest import agent_bot, calls, final
from .scripted_server import ScriptedLLM


def test_demo_command_edits_files_against_the_scripted_server(tmp_path: Path) -> None:
    ws, store = tmp_path / "ws", tmp_path / "store"
    ws.mkdir()
    proc = subprocess.run([sys.executable, "-m", "tests.claw.scripted_server", "fixtures/claw/demo.steps.json", "--",
                           *iterion_cmd("run", "fixtures/claw/demo.bot", "--workspace", str(ws),
                                        "--store-dir", str(store), "--json")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "paused_waiting_human" and out["outputs"]["coder"]["files"] == ["greet.py"]
    assert 'return "hello, " + name' in (ws / "greet.py").read_text()


def test_permission_flags_on_run_and_resume(tmp_path: Path, ws: Path, llm: ScriptedLLM) -> None:
    bot = agent_bot(tmp_path / "src", "anthropic")
    store = tmp_path / "store"
    env = {"OPENAI_BASE_URL": llm.openai_url, "ANTHROPIC_BASE_URL": llm.url}
    llm.add(calls(("write_file", {"path": "notes.md", "content": "n\n"})))
    r = run_cli("run", str(bot), "--workspace", str(ws), "--store-dir", str(store), "--permission", "ask",
                "--permission-deny", "bash(rm *)", "--json", env=env)
    assert r.returncode == 4, r.stderr
    run = json.loads(r.stdout)
    assert run["pending"]["permission"]["tool"] == "write_file" and not (ws / "notes.md").exists()
    llm.add(final("noted"))
    r2 = run_cli("resume", "--run-id", run["run_id"], "--store-dir", str(store),
                 "--permission-allow", "write_file(notes.md)", env=env)
    assert r2.returncode == 0, r2.stderr
    assert (ws / "notes.md").read_text() == "n\n"


def test_a_malformed_rule_is_refused_before_anything_exists(tmp_path: Path, ws: Path) -> None:
    bot = agent_bot(tmp_path / "src", "openai")
    store = tmp_path / "store"
    before = store_fingerprint(store)
    r = run_cli("run", str(bot), "--workspace", str(ws), "--store-dir", str(store),
                "--permission-allow", "bash(git *", "--permission", "sometimes")
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and "TOOL or TOOL(PATTERN)" in r.stderr
    assert "Traceback" not in r.stderr and store_fingerprint(store) == before
