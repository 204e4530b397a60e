"""Every command block of README.md and docs/*.md marked runnable runs as written.

The convention (docs/README.md, "Runnable blocks"): an HTML comment on the line right before a
```sh fence says what the block is.

- ``<!-- runnable -->``: the block runs, line by line, in a fresh empty directory with the demo's
  script backend (no API key, no network): each line through ``sh -c``; a line ending in ``\\``
  continues on the next; comment lines are skipped. ``<!-- runnable: exit=0,4,8 -->`` names the
  exit codes a line may end with (default 0 and 4, a run parked at the demo's gate);
  ``cwd=checkout`` runs it from the checkout (its ``fixtures/``) with the run store in a
  directory of the test.
- ``<!-- not runnable: WHY -->``: a block that cannot run here (an install, a long-lived server,
  a machine-specific path); the reason is for the reader.

The only substitutions are the ones a reader makes: ``.venv/bin/iterion`` and ``iterion`` are
this checkout's CLI (``<python> -m cli.main`` through an ``iterion`` on PATH), ``.venv/bin/python``
this interpreter, ``/tmp/`` a directory of this test (parallel runs never share it), ``RUN_ID``
the id of the first run a line printed. Every ```sh block carries one of the two markers, so a
new block is either tested or says why not.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- (runnable|not runnable)(?::\s*(.*?))? -->$")
FENCE = re.compile(r"^```(\w*)")
SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "CODEX_API_KEY",
           "ITERION_STORE_DIR", "ITERION_PROG", "ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_SERVER",
           "ITERION_SERVER_TOKEN", "ITERION_NATS_URL", "ITERION_PUSH_CHECKPOINTS", "COLUMNS")


@dataclass
class Block:
    doc: Path
    line: int          # the fence's line number (1-based)
    lang: str
    marker: str | None  # "runnable", "not runnable" or None
    options: str
    body: list[str]

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(REPO_ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    lines = doc.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = MARKER.match(lines[i - 1].strip()) if i else None
        found.append(Block(doc, i + 1, m[1], mark[1] if mark else None, (mark[2] or "") if mark else "",
                           lines[i + 1:end]))
        i = end + 1
    return found


ALL = [b for d in DOCS for b in blocks(d)]
RUNNABLE = [b for b in ALL if b.marker == "runnable"]


def commands(body: list[str]) -> list[str]:
    out: list[str] = []
    pending = ""
    for raw in body:
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        out.append(pending + raw)
        pending = ""
    assert not pending, "a block ends in a line continuation"
    return out


def allowed_exits(options: str) -> set[int]:
    m = re.search(r"exit=([\d,]+)", options)
    return {int(c) for c in m[1].split(",")} if m else {0, 4}


def test_every_sh_block_says_whether_it_runs() -> None:
    unmarked = [b.name for b in ALL if b.lang == "sh" and b.marker is None]
    assert not unmarked, ("these ```sh blocks carry no marker: put `<!-- runnable -->` (tested by this file) or "
                          f"`<!-- not runnable: WHY -->` on the line before the fence: {unmarked}")
    assert len(RUNNABLE) >= 3, "the docs lost their runnable blocks"
    assert any(b.doc.name == "README.md" for b in RUNNABLE) and any(b.doc.parent.name == "docs" for b in RUNNABLE)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_runnable_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    cwd, tmp, home, bindir = (tmp_path / n for n in ("work", "tmp", "home", "bin"))
    for d in (cwd, tmp, home, bindir):
        d.mkdir()
    shim = bindir / "iterion"  # `iterion` on PATH: this checkout's CLI
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m cli.main \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env.update(HOME=str(home), PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO_ROOT),
               ITERION_STORE_CEILING=str(tmp_path))
    if "cwd=checkout" in block.options:  # the checkout's fixtures, read only; the store is the test's
        cwd = REPO_ROOT
        env["ITERION_STORE_DIR"] = str(tmp_path / "store")
    run_id: str | None = None
    ok = allowed_exits(block.options)
    cmds = commands(block.body)
    assert cmds, f"{block.name}: a runnable block with no command"
    for line in cmds:
        cmd = (line.replace(".venv/bin/iterion", "iterion").replace(".venv/bin/python", shlex.quote(sys.executable))
               .replace("/tmp/", f"{tmp}/"))
        if "RUN_ID" in cmd:
            assert run_id, f"{block.name}: no run id printed before: {line}"
            cmd = cmd.replace("RUN_ID", run_id)
        p = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, check=False, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode in ok, f"{block.name}: {line}\n-> exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        m = re.search(r"^run ([0-9a-f]{32}) \(", p.stderr, re.MULTILINE)
        if m and run_id is None:
            run_id = m.group(1)
