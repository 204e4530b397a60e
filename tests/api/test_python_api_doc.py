"""docs/python-api.md runs as written: every ```python block, in order, in one namespace, in a
fresh directory holding the demo (script backend), in a real subprocess; then the CLI reads the
runs the doc made (one store, either way in)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, cli_env, run_cli

DOC = REPO_ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

RUNNER = """
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
ns = {"__name__": "__doc__"}
for i, code in enumerate(blocks):
    try:
        exec(compile(code, f"python-api.md block {i + 1}", "exec"), ns)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"BLOCK {i + 1} FAILED")
print("ALL BLOCKS RAN")
"""


def _run_blocks(blocks: list[str], tmp_path: Path) -> tuple[Path, Path, str]:
    """(the demo directory, the store, stdout) once ``blocks`` ran there in order."""
    work = tmp_path / "demo"
    shutil.copytree(REPO_ROOT / "fixtures" / "demo", work)
    store = tmp_path / "store"
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    env = cli_env({"ITERION_STORE_DIR": str(store), "ITERION_OTEL": None, "OTEL_EXPORTER_OTLP_ENDPOINT": None})
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / "blocks.json")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ALL BLOCKS RAN" in proc.stdout
    return work, store, proc.stdout


def test_the_readme_python_api_in_five_lines_runs(tmp_path: Path) -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## From Python", 1)[1].split("\n## ", 1)[0]
    [block] = BLOCK.findall(section)
    assert len(block.strip().splitlines()) == 5
    _, _, out = _run_blocks([block], tmp_path)
    assert out.startswith("finished ") and "demo-" in out


def test_every_python_block_of_the_doc_runs(tmp_path: Path) -> None:
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 6, "the doc lost its examples"
    work, store, out = _run_blocks(blocks, tmp_path)
    assert "approve ['approved', 'note']" in out and "published: ship it" in out
    assert "approve -> write" in out
    assert "already stopped" in out  # api.pause refused the cancelled run
    # the runs the doc made are the CLI's runs: same store, same statuses
    listed = json.loads(run_cli("inspect", "--json", cwd=work, env={"ITERION_STORE_DIR": str(store)}).stdout)
    statuses = sorted(r["status"] for r in listed)
    assert statuses == ["cancelled"] + ["finished"] * 7, listed  # the last example cancels one on purpose
    assert (work / "demo-out" / "published.md").is_file()
