"""Real runs for the restore-coverage tests: a workflow whose tool node does the damage (a
Python script outside the workspace), run through the CLI, then `iterion rewind --json`."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iterion.store import Store

from ..conftest import git, run_cli

FLOW = """\
## restore coverage: `damage` does what a hostile or careless node does, then fails
tool prepare:
  command: "true"

tool damage:
  command: "{py} {script} && false"

workflow cov:
  entry: prepare{worktree}
  prepare -> damage
  damage -> done
"""


@dataclass
class Rewound:
    run_id: str
    workspace: Path
    report: dict[str, Any]  # --json
    text: str  # a second rewind, in text mode
    event: dict[str, Any]  # the run_rewound payload of the --json rewind
    capture_events: list[dict[str, Any]]  # workspace_capture_skipped payloads

    @property
    def files(self) -> dict[str, Any]:
        return self.report["files"]

    def skipped(self) -> dict[str, str]:
        return {s["path"]: s["reason"] for s in self.files["skipped"]}


def cli(cwd: Path, store: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = run_cli(*args, cwd=cwd, store=store, env=env, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def setup(repo: Path, tmp_path: Path, damage: str, *, worktree: bool = False) -> None:
    """Commit the bot into ``repo``; ``damage`` is the body of the node's Python script."""
    script = tmp_path / "damage.py"
    script.write_text("import os, sys\n" + textwrap.dedent(damage))
    text = FLOW.format(py=sys.executable, script=script, worktree="\n  worktree: auto" if worktree else "")
    (repo / "cov.bot").write_text(text)
    git(repo, "add", "cov.bot")
    git(repo, "commit", "-q", "-m", "the bot")


def run_and_rewind(repo: Path, store: Path, *, env: dict[str, str] | None = None,
                   text_too: bool = True) -> Rewound:
    code, out, err = cli(repo, store, "run", "cov.bot", "--json", env=env)
    assert out.strip(), f"exit {code}: {err}"
    launched = json.loads(out)
    assert launched["status"] == "failed_resumable", (launched, err)
    run_id, ws = launched["run_id"], Path(launched["workspace"])
    code, out, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "damage", "--json", env=env)
    assert code == 0 and "Traceback" not in err, (code, out, err)
    report = json.loads(out)
    events = Store(store).read_events(run_id)
    rewound = [e.payload for e in events if e.type == "run_rewound"]
    text = ""
    if text_too:
        code, text, err = cli(repo, store, "rewind", "--run-id", run_id, "--node", "damage", env=env)
        assert code == 0 and "Traceback" not in err, (code, text, err)
    captures = [e.payload for e in events if e.type == "workspace_capture_skipped"]
    return Rewound(run_id, ws, report, text, rewound[0], captures)


def du(path: Path) -> int:
    """Bytes actually allocated under ``path`` (st_blocks), not the files' apparent sizes."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total
