"""The small things a user notices (issue 14, point 9), each through the CLI in a subprocess.

(-h, word types and shell completion are in tests/cli/test_startup.py.)
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import FIXTURES, REPO_ROOT, git, run_cli, write_bot

AGENT = """
schema note:
  text: string

agent write:
  model: "m"
  output: note
  user: "write"

workflow w:
  entry: write
  write -> done
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {"ITERION_STORE_DIR": str(tmp_path / "store"), "COLUMNS": "80"}
    env.update(extra)
    return env


def test_backends_names_the_real_flag_and_the_order_including_iterion_backend(tmp_path: Path) -> None:
    out = run_cli("backends", cwd=tmp_path, env={"ITERION_SCRIPT_FILE": None, "ITERION_BACKEND": None})
    assert out.returncode == 0
    assert "--script-file" not in out.stdout and "--script FILE" in out.stdout
    assert "$ITERION_BACKEND" in out.stdout
    assert "--script" in run_cli("run", "--help").stdout  # the flag it names exists


def test_iterion_backend_is_honoured_by_the_engine(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", AGENT, script={"write": {"*": {"output": {"text": "hi"}}}})
    script = str(bot.with_name("wf.script.yaml"))
    plain = run_cli("run", str(bot), "--script", script, "--json", cwd=ws, env=_env(tmp_path))
    assert plain.returncode == 0, plain.stderr  # no env: answers given -> the script backend
    chosen = run_cli("run", str(bot), "--script", script, "--json", cwd=ws,
                     env=_env(tmp_path, ITERION_BACKEND="nosuch-backend"))
    assert chosen.returncode != 0
    assert "nosuch-backend" in chosen.stdout + chosen.stderr  # the engine asked for the named backend


def test_fork_of_an_unknown_node_names_the_nodes_it_could_fork_from(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    shutil.copytree(FIXTURES / "demo", proj)
    paused = run_cli("run", "demo.bot", "--json", cwd=proj, env=_env(tmp_path))
    assert paused.returncode == 4, paused.stderr
    import json

    run_id = json.loads(paused.stdout)["run_id"]
    before = sorted(p.name for p in (tmp_path / "store" / "runs").iterdir())
    out = run_cli("fork", "--run-id", run_id, "--node", "nosuch", cwd=proj, env=_env(tmp_path))
    assert out.returncode == 2, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("error: ") and "'nosuch'" in first and "write" in first and "review" in first
    assert sorted(p.name for p in (tmp_path / "store" / "runs").iterdir()) == before  # no child run made


def test_a_worktree_run_says_why_it_did_not_fast_forward(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool one:
          command: "echo one > one.txt"

        workflow wt:
          entry: one
          worktree: auto
          one -> done
    """)
    head = git(ws, "rev-parse", "main").strip()
    out = run_cli("run", str(bot), "--no-auto-merge", cwd=ws, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "did not fast-forward: auto-merge disabled" in out.stderr
    assert git(ws, "rev-parse", "main").strip() == head
    git(ws, "commit", "-q", "--allow-empty", "-m", "moved on")  # the next run starts from here
    out2 = run_cli("run", str(bot), cwd=ws, env=_env(tmp_path))
    assert out2.returncode == 0 and "fast-forwarded main" in out2.stderr  # the happy path says so too


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and ".git" not in p.relative_to(root).parts}


def test_init_in_an_existing_project_adds_the_workflow_and_touches_nothing_else(tmp_path: Path, ws: Path) -> None:
    (ws / "notes.txt").write_text("mine\n")
    before = _tree(ws)
    out = run_cli("init", ".", cwd=ws)
    assert out.returncode == 0, out.stderr
    after = _tree(ws)
    assert {k: v for k, v in after.items() if k in before} == before  # README.md and notes.txt untouched
    assert sorted(set(after) - set(before)) == ["answers.json", "demo.bot", "demo.script.yaml"]
    again = run_cli("init", ".", cwd=ws)
    assert again.returncode == 2 and "demo.bot" in again.stderr and "nothing was written" in again.stderr
    assert _tree(ws) == after
    ran = run_cli("run", "demo.bot", "--answers-file", "answers.json", cwd=ws, env=_env(tmp_path))
    assert ran.returncode in (0, 4), ran.stderr  # the starter workflow runs where it was added


def test_the_packaged_demo_is_the_fixture_demo() -> None:
    packaged = REPO_ROOT / "cli" / "demo"
    names = sorted(p.name for p in (FIXTURES / "demo").iterdir() if p.is_file())
    assert sorted(p.name for p in packaged.iterdir() if p.is_file()) == names
    _match, mismatch, errors = filecmp.cmpfiles(FIXTURES / "demo", packaged, names, shallow=False)
    assert mismatch == [] and errors == [], "copy fixtures/demo/* to cli/demo/"


def test_init_works_from_an_installed_package_without_a_source_checkout(tmp_path: Path) -> None:
    site = tmp_path / "site"
    for pkg in ("cli", "iterion", "gitrefs", "workspacetrack"):
        shutil.copytree(REPO_ROOT / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert not (site / "fixtures").exists()
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-m", "cli.main", "init", "fresh", "--json"], check=False, cwd=tmp_path,
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert str(site) in subprocess.run([sys.executable, "-c", "import cli; print(cli.__file__)"], check=False, env=env,
                                       capture_output=True, text=True, cwd=tmp_path).stdout
    assert _tree(tmp_path / "fresh") == _tree(FIXTURES / "demo")
