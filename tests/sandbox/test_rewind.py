"""Rewind of a sandboxed tool node restores what it wrote, and the resume replays it in a fresh
sandbox (the workspace is bound into it, so the run's versioning sees every write)."""

from __future__ import annotations

import json
from pathlib import Path

from iterion.store import Store

from ..conftest import run_cli, write_bot


def test_rewind_of_a_sandboxed_node_restores_its_files(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        schema ok:
          approved: bool

        tool write:
          command: "printf one > made.txt && printf changed > README.md && echo sandboxed"

        human gate:
          output: ok
          instructions: "Keep it?"

        workflow w:
          sandbox: auto
          entry: write
          write -> gate
          gate -> done
    """)
    store = tmp_path / "store"
    readme = (ws / "README.md").read_bytes()
    out = json.loads(run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws).stdout)
    assert out["status"] == "paused_waiting_human", out
    assert (ws / "made.txt").read_text() == "one" and (ws / "README.md").read_text() == "changed"

    p = run_cli("rewind", "--run-id", out["run_id"], "--node", "write", "--store-dir", str(store), cwd=ws)
    assert p.returncode == 0, p.stderr
    assert not (ws / "made.txt").exists() and (ws / "README.md").read_bytes() == readme

    # the replay of `write` runs in a fresh sandbox, then the gate asks again
    p = run_cli("resume", "--run-id", out["run_id"], "--store-dir", str(store), "--json", cwd=ws)
    assert json.loads(p.stdout)["status"] == "paused_waiting_human", p.stderr
    assert (ws / "made.txt").read_text() == "one"
    p = run_cli("resume", "--run-id", out["run_id"], "--store-dir", str(store), "--answer", "approved=true", "--json",
                cwd=ws)
    assert json.loads(p.stdout)["status"] == "finished", p.stderr
    resumed = [e for e in Store(store).read_events(out["run_id"]) if e.type == "run_resumed"][-1]
    assert resumed.payload["sandbox"]["mode"] == "auto"
