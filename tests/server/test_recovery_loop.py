"""The recovery loop end to end through the HTTP service (issue 15's acceptance): a worktree run
and an in-place run pushing checkpoints to `origin` (a bare repository) park at a gate;
`iterion remote runs get` prints the hint from the run's timeline; in a fresh clone the printed
fetch command brings exactly the recorded commit; the user's index stays byte-identical; a later
failed push leaves the hint on the last success."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.conftest import git, run_cli, write_bot
from tests.server.conftest import Server, demo_project, start_server, wait_status

GATE_WORKTREE = """
schema approval:
  approved: bool

tool make:
  command: "echo made > made.txt"

human gate:
  output: approval
  instructions: "Ship it?"

workflow wt:
  worktree: auto
  entry: make
  make -> gate
  gate -> done
"""


def _index(ws: Path) -> str:
    return hashlib.sha256((ws / ".git" / "index").read_bytes()).hexdigest()


def _remote(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"ITERION_SERVER": server.url, "ITERION_SERVER_TOKEN": server.token}
    return run_cli("remote", "runs", *args, cwd=server.project, env=env)


def _fetch_in_fresh_clone(origin: Path, where: Path, fetch_command: str) -> str:
    git(where.parent, "clone", "-q", str(origin), str(where))
    subprocess.run(shlex.split(fetch_command), cwd=where, check=True, capture_output=True)
    return git(where, "rev-parse", "FETCH_HEAD").strip()


def test_pushed_checkpoints_are_recovered_through_remote_get(tmp_path: Path) -> None:
    project = demo_project(tmp_path / "project")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(project, "remote", "add", "origin", str(origin))
    git(project, "push", "-q", "origin", "main")
    index0 = _index(project)
    server = start_server(project, env={"ITERION_PUSH_CHECKPOINTS": "origin"})
    try:
        c = server.client()
        # in place, launched over HTTP (the worker inherits the push setting from the environment)
        in_place = c.post("/api/runs", json={"file": "demo/demo.bot"}).json()["run_id"]
        wait_status(c, in_place, {"paused_waiting_human"})
        # a worktree run launched by the CLI into the same store: the server serves it alike
        bot = write_bot(tmp_path / "wf", GATE_WORKTREE)
        proc = run_cli("run", str(bot), "--push-checkpoints", "origin", "--json", cwd=project)
        assert proc.returncode == 4, proc.stderr
        worktree = json.loads(proc.stdout)["run_id"]
        assert _index(project) == index0

        for n, run_id in enumerate((in_place, worktree)):
            got = _remote(server, "get", run_id)
            assert got.returncode == 0, got.stderr
            fetch = re.search(r"fetch it \(.*\): (git fetch .+)$", got.stdout, re.MULTILINE)
            assert fetch, got.stdout
            hint = json.loads(_remote(server, "get", run_id, "--json").stdout)["run"]["workspace_checkpoint"]
            assert hint["source"] == "run_workspace_checkpoint" and hint["fetch_command"] == fetch.group(1)
            assert hint["ref"].startswith(f"refs/iterion/runs/{run_id}/checkpoints/")
            assert _fetch_in_fresh_clone(origin, tmp_path / f"clone{n}", fetch.group(1)) == hint["commit"]
        assert _index(project) == index0

        # the remote refuses pushes from now on: the run goes on and finishes, its final push
        # fails (an event, never a failed run), and the hint stays on the last success
        before = json.loads(_remote(server, "get", in_place, "--json").stdout)["run"]["workspace_checkpoint"]
        hook = origin / "hooks" / "pre-receive"
        hook.write_text("#!/bin/sh\nexit 1\n")
        hook.chmod(0o755)
        done = _remote(server, "resume", in_place, "--answer", "approved=true", "--answer", "note=ok")
        assert done.returncode == 0, done.stderr
        events = c.get(f"/api/runs/{in_place}/events", params={"limit": 1000}).json()
        kinds = [e["type"] for e in (events["events"] if isinstance(events, dict) else events)]
        assert "run_workspace_checkpoint_failed" in kinds
        after = json.loads(_remote(server, "get", in_place, "--json").stdout)["run"]["workspace_checkpoint"]
        assert after == before
        assert _index(project) == index0
    finally:
        server.stop()
