"""`iterion run` / `resume` / `inspect` / `init` in real subprocesses."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ..conftest import git, run_cli
from .conftest import write_bot

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo" / "demo.bot"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def test_run_with_validation_errors_prints_diagnostics_and_creates_nothing(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool a:
          command: "echo a"

        workflow broken:
          entry: a
          a -> nowhere
    """)
    p = cli("run", str(bot), "--store-dir", str(tmp_path / "store"), cwd=ws)
    assert p.returncode == 2
    assert "C001" in p.stdout and "wf.bot:" in p.stdout  # the same lines `iterion validate` prints
    assert p.stderr.startswith("error: ") and "Traceback" not in p.stderr
    assert not (tmp_path / "store" / "runs").exists() or not any((tmp_path / "store" / "runs").iterdir())


def test_demo_runs_to_its_gate_then_resume_answers_and_finishes(tmp_path: Path, ws: Path) -> None:
    store = str(tmp_path / "store")
    p = cli("run", str(DEMO), "--store-dir", store, cwd=ws)
    assert p.returncode == 4, p.stderr
    assert "paused_waiting_human" in p.stderr
    line = next(ln for ln in p.stderr.splitlines() if "answer with:" in ln)
    # placeholders, never a default answer (issue 34 point 3)
    assert "--answer 'approved=<true|false>'" in line and "--answer 'note=<text>'" in line
    listing = json.loads(cli("inspect", "--store-dir", store, "--json", cwd=ws).stdout)
    (run,) = listing
    assert run["status"] == "paused_waiting_human" and run["workflow"] == "demo"
    assert (ws / "demo-out" / "draft.md").exists() and (ws / "demo-out" / "reviewed.txt").exists()

    p2 = cli("resume", "--run-id", run["id"], "--store-dir", store, "--answer", "approved=true",
             "--answer", "note=ship it", cwd=ws)
    assert p2.returncode == 0, p2.stderr
    assert "finished" in p2.stderr
    assert (ws / "demo-out" / "published.md").read_text() == (ws / "demo-out" / "draft.md").read_text()
    detail = json.loads(cli("inspect", "--run-id", run["id"], "--store-dir", store, "--json", "--events",
                            cwd=ws).stdout)
    assert detail["status"] == "finished" and detail["checkpoint_node"] is None
    assert detail["outputs"]["approve"] == {"approved": True, "note": "ship it"}
    labels = [b["label"] for b in detail["boundaries"]]
    assert labels[labels.index("pause:approve:0") + 1] == "resume:approve:0"
    assert detail["budget"]["consumed"]["tokens"] == 610
    assert detail["executed"].count("write:0") == 1 and "write:1" in detail["executed"]
    assert any(e["type"] == "run_resumed" for e in detail["events"])
    human = cli("inspect", "--run-id", run["id"], "--store-dir", store, cwd=ws)
    assert human.returncode == 0 and re.search(r"^boundaries: \d+: pre:gather:0 ", human.stdout, re.MULTILINE)


def test_run_json_and_answers_file(tmp_path: Path, ws: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"approve": {"approved": False, "note": "not today"}}))
    fresh = tmp_path / "fresh-ws"  # an explicit --workspace must exist (issue 10: never created)
    fresh.mkdir()
    p = cli("run", str(DEMO), "--store-dir", str(tmp_path / "store"), "--answers-file", str(answers),
            "--json", "--var", "out=elsewhere", "--workspace", str(fresh), cwd=ws)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["status"] == "finished" and result["outputs"]["approve"]["note"] == "not today"
    assert (fresh / "elsewhere" / "draft.md").exists() and not (fresh / "elsewhere" / "published.md").exists()


def test_failed_tool_exit_code_then_resume_via_cli(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool check:
          command: "test -f ok.flag"

        workflow w:
          entry: check
          check -> done
    """)
    store = str(tmp_path / "store")
    p = cli("run", str(bot), "--store-dir", store, "--json", cwd=ws)
    assert p.returncode == 5, p.stderr
    rid = json.loads(p.stdout)["run_id"]
    (ws / "ok.flag").write_text("")
    p2 = cli("resume", "--run-id", rid, "--store-dir", store, cwd=ws)
    assert p2.returncode == 0, p2.stderr


def test_bad_input_is_one_error_line(tmp_path: Path, ws: Path) -> None:
    p = cli("resume", "--run-id", "nope", "--store-dir", str(tmp_path / "store"), cwd=ws)
    assert p.returncode == 2 and p.stderr.startswith("error: run nope not found") and "Traceback" not in p.stderr
    p = cli("run", str(DEMO), "--store-dir", str(tmp_path / "store"), "--var", "nosuch=1", cwd=ws)
    assert p.returncode == 2 and "unknown var 'nosuch'" in p.stderr and "Traceback" not in p.stderr


def test_init_scaffolds_a_runnable_demo(tmp_path: Path, ws: Path) -> None:
    p = cli("init", "mydemo", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert (ws / "mydemo" / "demo.bot").exists() and (ws / "mydemo" / "demo.script.yaml").exists()
    p3 = cli("run", "demo.bot", cwd=ws / "mydemo")
    assert p3.returncode == 4, p3.stderr
    # the project's store: in the repository's git directory, never versioned, nothing written into the tree
    assert any((ws / ".git" / "iterion" / "store" / "runs").iterdir())
    assert not (ws / ".iterion").exists() and not (ws / "mydemo" / ".gitignore").exists()
    status = git(ws, "status", "--porcelain", "--untracked-files=all")
    assert "mydemo/demo.bot" in status and "iterion/" not in status and ".gitignore" not in status
    again = cli("init", "mydemo", cwd=ws)
    # init adds to an existing project (issue 14 point 9) but never overwrites: the demo files are there
    assert again.returncode == 2 and "already has" in again.stderr and "nothing was written" in again.stderr
