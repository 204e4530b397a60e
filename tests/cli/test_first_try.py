"""Issue 34 point 4: first-try rough edges a new user met, each through the real CLI."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli_env, run_cli
from tests.natsserver import NatsServer

SCRIPT = Path(sys.executable).parent / "iterion"


def _sh(cmd: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    e = cli_env({"ITERION_STORE_DIR": None, "ITERION_PROG": None, **env})
    return subprocess.run(["sh", "-c", cmd], cwd=cwd, env=e, check=False, capture_output=True, text=True,
                          timeout=180)


def test_init_next_step_runs_after_its_own_cd_when_invoked_by_a_relative_path(tmp_path: Path) -> None:
    assert SCRIPT.is_file(), "the venv's iterion script is missing"
    relative = os.path.relpath(SCRIPT, tmp_path)  # e.g. ../../work/x/.venv/bin/iterion
    assert not relative.startswith("/") and "/" in relative
    made = _sh(f"{relative} init my-demo", tmp_path)
    assert made.returncode == 0, made.stderr
    m = re.search(r"^next: (.+)$", made.stdout, re.MULTILINE)
    assert m, made.stdout
    step = m.group(1)
    assert step.startswith("cd my-demo && /"), step  # the program named absolutely: found after the cd
    ran = _sh(step, tmp_path)
    assert ran.returncode == 4, ran.stderr  # the demo parks at its gate: it ran
    assert "paused_waiting_human" in ran.stderr


def test_the_live_timer_of_a_running_node_moves_without_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """It stayed at 0.0s for the whole node: lines were redrawn only when an event arrived."""
    from types import SimpleNamespace

    from cli.progress import Progress

    monkeypatch.setenv("COLUMNS", "80")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    now = [100.0]  # a clock the test moves: nothing here depends on the wall clock's speed
    progress = Progress(live=True, clock=lambda: now[0], tick_s=0.01)
    progress(SimpleNamespace(type="node_started", node="slow", iteration=0, payload={"kind": "tool"}))
    assert "slow (tool, iteration 0) 0.0s" in err.getvalue()
    now[0] = 142.0  # 42 s into the node, and no event since it started
    deadline = time.monotonic() + 30
    while "slow (tool, iteration 0) 42.0s" not in err.getvalue():
        assert time.monotonic() < deadline, err.getvalue()
        time.sleep(0.01)
    progress(SimpleNamespace(type="node_finished", node="slow", iteration=0, payload={}))
    assert "✓ slow 42.00s" in err.getvalue()
    ticker = progress.ticker
    deadline = time.monotonic() + 30
    while ticker is not None and ticker.is_alive():  # no node runs: the ticker ends by itself
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_inspect_shows_times_rewinds_no_raw_none_and_summarises_boundaries(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", demo)
    store = str(tmp_path / "store")
    assert run_cli("run", str(demo / "demo.bot"), "--workspace", str(demo), "--store-dir", store,
                   cwd=tmp_path).returncode == 4
    (run,) = json.loads(run_cli("inspect", "--store-dir", store, "--json", cwd=tmp_path).stdout)
    r = run_cli("rewind", "--run-id", run["id"], "--node", "review", "--store-dir", store, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = run_cli("inspect", "--run-id", run["id"], "--store-dir", store, cwd=tmp_path).stdout
    assert "None" not in text, text
    assert re.search(r"^started: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", text, re.MULTILINE), text
    assert re.search(r"^ended: - \(not ended: \w+\), \S+ so far$", text, re.MULTILINE), text
    assert re.search(r"^rewinds: 1, the last to review at ", text, re.MULTILINE), text
    line = next(ln for ln in text.splitlines() if ln.startswith("boundaries: "))
    detail = json.loads(run_cli("inspect", "--run-id", run["id"], "--store-dir", store, "--json",
                                cwd=tmp_path).stdout)
    labels = [b["label"] for b in detail["boundaries"]]
    assert len(labels) > 6 and line.startswith(f"boundaries: {len(labels)}: ") and "--boundaries" in line
    assert labels[len(labels) // 2] not in line.split()  # summarised: the middle is left out
    every = run_cli("inspect", "--run-id", run["id"], "--store-dir", store, "--boundaries", cwd=tmp_path).stdout
    line = next(ln for ln in every.splitlines() if ln.startswith("boundaries: "))
    assert line == f"boundaries: {len(labels)}: " + " ".join(labels)
    assert detail["started_at"] and detail["ended_at"] is None and detail["duration_s"] >= 0
    assert [x["to_node"] for x in detail["rewinds"]] == ["review"]
    # a run that ended: its end and total (the rewound run replays to the gate, then is answered)
    assert run_cli("resume", "--run-id", run["id"], "--store-dir", store, cwd=tmp_path).returncode == 4
    r = run_cli("resume", "--run-id", run["id"], "--store-dir", store, "--answers-file",
                str(demo / "answers.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = run_cli("inspect", "--run-id", run["id"], "--store-dir", store, cwd=tmp_path).stdout
    assert re.search(r"^ended: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, took \S+$", text, re.MULTILINE), text
    assert "None" not in text, text


def test_at_80_columns_the_coloured_list_cuts_the_id_never_the_name_nor_its_prefix(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import cli.runlist as runlist

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(runlist, "colour_enabled", lambda stream: True)  # the terminal layout
    rows = [{"id": "01a250c34cd933cef4eac988c0df1c69", "name": "a-rather-long-workflow-keen-zephyr",
             "status": "paused_waiting_human", "workflow": "a-rather-long-workflow", "age": "3m"},
            {"id": "01b7e0c34cd933cef4eac988c0df1c70", "name": "a-rather-long-workflow-calm-river",
             "status": "finished", "workflow": "a-rather-long-workflow", "age": "1d"}]
    runlist.add_short_ids(rows)
    runlist.print_runs(rows)
    lines = capsys.readouterr().out.splitlines()
    assert all(len(ln) <= 80 for ln in lines), lines
    for r, line in zip(rows, lines[1:]):
        assert r["name"] in line and line.startswith(r["short_id"]) and r["id"] not in line, line


def test_gc_reports_only_what_it_removed(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", demo)
    store = str(tmp_path / "store")
    done = run_cli("run", str(demo / "demo.bot"), "--workspace", str(demo), "--store-dir", store,
                   "--answers-file", str(demo / "answers.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first = run_cli("gc", "--store-dir", store, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("collected run ") and lines[-1].startswith("gc: freed ")
    assert not re.search(r"\b0 (refs?|objects?|runs?|B)\b|kept", first.stdout), first.stdout  # no zero part
    again = run_cli("gc", "--store-dir", store, cwd=tmp_path)
    assert again.stdout == "gc: nothing to free (0 runs kept)\n", again.stdout


def test_with_nats_stored_in_names_the_nats_store(tmp_path: Path, nats_server: NatsServer) -> None:
    import uuid

    demo = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", demo)
    prefix = "s" + uuid.uuid4().hex[:10]
    p = run_cli("run", str(demo / "demo.bot"), "--workspace", str(demo), "--nats", nats_server.url,
                "--store-dir", str(tmp_path / "store"), cwd=tmp_path, env={"ITERION_NATS_PREFIX": prefix})
    assert p.returncode == 4, p.stderr
    line = next(ln for ln in p.stderr.splitlines() if "stored in:" in ln)
    assert f"the run store at {nats_server.url} (prefix {prefix})" in line, line
    assert "this machine's part: " + str(tmp_path / "store") in line


OPENAI_AGENT = """
schema note:
  text: string

agent write:
  backend: "openai"
  model: "gpt-4o-mini"
  output: note
  user: "write"

workflow w:
  entry: write
  write -> done
"""

NO_CREDENTIALS = {k: None for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                                    "ITERION_BACKEND", "ITERION_DEFAULT_BACKEND", "ITERION_SCRIPT_FILE")}


def test_a_run_without_credentials_for_its_backend_is_refused_before_it_exists(tmp_path: Path) -> None:
    from tests.conftest import make_checkout, write_bot

    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", OPENAI_AGENT)
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, env=NO_CREDENTIALS)
    assert p.returncode == 2, p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith("error: cannot start: node write runs on openai (node write's backend:), unusable "
                            "here: no $OPENAI_API_KEY"), p.stderr
    assert "no run was created" in first and "iterion backends" in p.stderr
    runs = store / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing in the store
    assert run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout.strip() == "[]"
    # validate says so as a warning (exit 0: the file itself is valid)
    v = run_cli("validate", str(bot), cwd=ws, env=NO_CREDENTIALS)
    assert v.returncode == 0, v.stderr
    assert "warning: " in v.stderr and "node write runs on openai" in v.stderr and "no $OPENAI_API_KEY" in v.stderr
    vj = json.loads(run_cli("validate", str(bot), "--json", cwd=ws, env=NO_CREDENTIALS).stdout)
    assert vj["ok"] and len(vj["files"][0]["unusable_backends"]) == 1
    # with the credential (an endpoint) set, nothing is said and the run is allowed to start
    ok = run_cli("validate", str(bot), cwd=ws, env={**NO_CREDENTIALS, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert ok.returncode == 0 and "warning:" not in ok.stderr, ok.stderr
