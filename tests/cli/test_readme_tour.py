"""Issue 14 point 1: the README's tour, pasted in order, works.

The fenced block under "## A tour" is parsed and each line run literally through ``sh -c`` in
a fresh directory; the only substitutions are the ones a reader makes: ``.venv/bin/iterion`` is
this interpreter's ``-m cli.main``, ``RUN_ID`` the id the run printed, and ``/tmp/iterion-tour``
a directory of this test (so parallel runs never share it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, run_cli

PROGRAM = f"{shlex.quote(sys.executable)} -m cli.main"


def tour_lines() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("## A tour", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the tour has no ```sh block"
    return [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_readme_tour_runs_as_pasted(tmp_path: Path) -> None:
    lines = tour_lines()
    assert any("rewind" in ln and "--auto" in ln for ln in lines) and any("--force" in ln for ln in lines)
    cwd = tmp_path / "fresh"
    cwd.mkdir()
    tour = tmp_path / "iterion-tour"
    env = {k: v for k, v in os.environ.items() if k not in ("ITERION_STORE_DIR", "ITERION_PROG")}
    run_id = None
    codes = []
    for line in lines:
        cmd = line.replace(".venv/bin/iterion", PROGRAM).replace("/tmp/iterion-tour", str(tour))
        if "RUN_ID" in cmd:
            assert run_id, f"no run id printed before: {line}"
            cmd = cmd.replace("RUN_ID", run_id)
        p = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=180)
        codes.append((line, p.returncode))
        assert p.returncode in (0, 4), f"{line}\n-> {p.returncode}\n{p.stdout}\n{p.stderr}"
        m = re.search(r"^run ([0-9a-f]{32}) \(", p.stderr, re.MULTILINE)
        if m and run_id is None:
            run_id = m.group(1)
    # the run parked twice (first run, replay after the rewind) and then finished
    assert [c for _, c in codes].count(4) == 2, codes
    p = run_cli("inspect", "--run-id", str(run_id), "--json", cwd=cwd,
                env={"ITERION_STORE_DIR": None, "ITERION_PROG": None}, timeout=60)
    doc = json.loads(p.stdout)
    assert doc["status"] == "finished"
    assert "review" in doc["outputs"] and doc["outputs"]["approve"]["approved"] is True
    assert (tour / "demo-out" / "published.md").is_file()
    # the edit the tour made is the user's own: the rewind left it in place
    assert "Review this draft, strictly, about" in (tour / "demo.bot").read_text()
