"""`iterion --quiet`: the global flag silences notices (the slow-path note, logged warnings) and
nothing else; it is the flag form of ``ITERION_QUIET=1`` (issue 32, point 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli.startup import QUIET_ENV
from tests.conftest import REPO_ROOT, run_cli
from workspacetrack import fastext


def _demo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("demo.bot", "demo.script.yaml", "answers.json"):
        (ws / name).write_bytes((REPO_ROOT / "fixtures" / "demo" / name).read_bytes())
    return ws


def test_the_flag_and_the_variable_are_one_setting() -> None:
    assert QUIET_ENV == fastext.QUIET_ENV


def test_quiet_silences_the_slow_path_note_and_the_run_still_finishes(tmp_path: Path) -> None:
    ws = _demo(tmp_path)
    store = tmp_path / "store"

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        code = ("import sys\nsys.modules['workspacetrack._fastwalk'] = None  # as if it was never built\n"
                f"sys.argv = ['iterion', *{list(flags)!r}, 'run', 'demo.bot', '--answers-file', 'answers.json', "
                f"'--store-dir', {str(store)!r}]\nfrom cli.main import main\nmain()")
        base = {k: v for k, v in os.environ.items() if k not in ("ITERION_PURE", QUIET_ENV)}
        return subprocess.run([sys.executable, "-c", code], cwd=ws, capture_output=True, text=True, check=False,
                              env={**base, "PYTHONPATH": str(REPO_ROOT)}, timeout=120)

    loud, quiet = run(), run("--quiet")
    assert loud.returncode == 0 and quiet.returncode == 0, (loud.stderr, quiet.stderr)
    assert "slow pure-Python walk" in loud.stderr
    assert "slow pure-Python walk" not in quiet.stderr
    # the progress lines and the final status are unchanged (the note is the only line dropped)
    progress = [sorted(ln.split()[:2] for ln in p.stderr.splitlines() if ln.startswith(("▶", "✓")))
                for p in (loud, quiet)]  # (sorted: the fan-out's branches finish in either order)
    assert progress[0] == progress[1] and len(progress[0]) >= 10
    assert "finished" in quiet.stderr + quiet.stdout


def test_quiet_silences_a_logged_notice_but_not_the_listing(tmp_path: Path) -> None:
    ws = _demo(tmp_path)
    store = tmp_path / "store"
    ran = run_cli("run", "demo.bot", "--answers-file", "answers.json", store=store, cwd=ws)
    assert ran.returncode == 0, ran.stderr
    index = store / "run-index.json"
    outs = {}
    for flags in ((), ("--quiet",)):
        assert index.is_file()
        index.write_text("{damaged")
        p = run_cli(*flags, "inspect", store=store, cwd=ws, env={QUIET_ENV: None})
        assert p.returncode == 0, p.stderr
        outs[flags] = p
    assert "rebuilt from the run documents" in outs[()].stderr
    assert "rebuilt" not in outs[("--quiet",)].stderr and outs[("--quiet",)].stderr.strip() == ""
    listed = [[ln.split()[:4] for ln in p.stdout.splitlines()] for p in outs.values()]  # (not the age)
    assert listed[0] == listed[1] and len(listed[0]) == 2  # the same run listed


def test_quiet_is_listed_in_the_root_help() -> None:
    p = run_cli("--help")
    assert "--quiet" in p.stdout and "notices" in p.stdout
