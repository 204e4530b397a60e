"""An agent CLI backend (claude_code, through a fake `claude` on PATH) under `sandbox: auto`: the
CLI runs inside bubblewrap, writes the workspace but not outside it nor .git, and keeps the host
network (it talks to its provider)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from iterion.store import RunStatus, Store

from ..conftest import write_bot
from ..engine.conftest import launch
from .conftest import PROBE, Listener

# what the model's CLI would do on its own: write outside, write .git, reach the network, then answer
FAKE = f"""#!{sys.executable}
import json, os, subprocess, sys
sys.stdin.read()
seen = {{}}
for name, path in (("outside", os.environ["OUTSIDE_FILE"]), ("git", ".git/cli-was-here"), ("ws", "by-cli.txt")):
    try:
        with open(path, "a") as f:
            f.write("cli")
        seen[name] = "written"
    except OSError as exc:
        seen[name] = exc.strerror
seen["net"] = subprocess.run([sys.executable, "{PROBE}", "connect", os.environ["LISTEN_PORT"]],
                             capture_output=True, text=True).stdout.strip()
with open("cli-record.json", "w") as f:
    json.dump(seen, f)
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "session_id": "s",
                   "total_cost_usd": 0.0, "usage": {{"input_tokens": 1, "output_tokens": 1}},
                   "result": json.dumps({{"summary": "done"}})}}))
"""


def test_an_agent_cli_runs_inside_the_sandbox(tmp_path: Path, ws: Path, store: Store, outside: Path,
                                              listener: Listener, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = outside.parent / "bin"  # not under /tmp or /dev/shm: the CLI must be visible inside
    bindir.mkdir()
    (bindir / "claude").write_text(FAKE)
    (bindir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("ITERION_CLAUDE_BIN", raising=False)
    monkeypatch.setenv("OUTSIDE_FILE", str(outside))
    monkeypatch.setenv("LISTEN_PORT", str(listener.port))
    before = outside.read_bytes()
    bot = write_bot(tmp_path / "src", """
        schema result:
          summary: string

        agent coder:
          backend: claude_code
          model: "sonnet"
          user: "Fix it."
          output: result

        workflow w:
          sandbox: auto
          entry: coder
          coder -> done
    """)
    r = launch(store, bot, ws)
    assert r.status is RunStatus.FINISHED, r.error
    seen = json.loads((ws / "cli-record.json").read_text())
    assert seen["outside"] == "Read-only file system" and outside.read_bytes() == before
    assert seen["git"] == "Read-only file system" and not (ws / ".git" / "cli-was-here").exists()
    assert seen["ws"] == "written" and (ws / "by-cli.txt").read_text() == "cli"
    assert seen["net"] == "connected" and listener.accepted == 1
