"""Issue 14 points 4, 5 and 8 through the CLI in subprocesses: a parked run says how to
continue, exit codes are the README's table, bundles (directory, packed .botz) run and resume."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli, start_cli, wait_for_file, write_bot

# the commands these tests execute as printed must name a program sh can find
PROG = {"ITERION_PROG": f"{shlex.quote(sys.executable)} -m cli.main"}

GATE = """
schema pick:
  level: string [enum: "low", "high"]
  ok: bool

human ask:
  output: pick
  instructions: "Which level?"

workflow gate:
  entry: ask
  ask -> done
"""


def _demo(tmp: Path) -> Path:
    d = tmp / "demo"
    shutil.copytree(FIXTURES / "demo", d)
    return d


def _run_id(stderr: str) -> str:
    m = re.search(r"^run ([0-9a-f]{32}) \(", stderr, re.MULTILINE)
    assert m, stderr
    return m.group(1)


# -- point 4 ------------------------------------------------------------------------------------
def test_inspect_of_a_waiting_run_shows_fields_types_enum_and_the_command(tmp_path: Path) -> None:
    bot = write_bot(tmp_path / "wf", GATE)
    p = run_cli("run", str(bot), "--workspace", str(tmp_path), cwd=tmp_path)
    if p.returncode == 2 and "enum" in p.stderr:  # pragma: no cover - grammar guard
        raise AssertionError(p.stderr)
    assert p.returncode == 4, p.stdout + p.stderr
    rid = _run_id(p.stderr)
    i = run_cli("inspect", "--run-id", rid, cwd=tmp_path, env=PROG)
    assert i.returncode == 0, i.stderr
    assert "Which level?" in i.stdout
    assert "level: string, one of low, high" in i.stdout and "ok: bool" in i.stdout
    name = json.loads(run_cli("inspect", "--run-id", rid, "--json", cwd=tmp_path).stdout)["name"]
    cmd = re.search(r"^continue with: (.+)$", i.stdout, re.MULTILINE)  # hints name the run by its name
    assert cmd and f"resume --run-id {name} --answer 'level=<low|high>' --answer 'ok=<true|false>'" in cmd.group(1)
    assert json.loads(run_cli("inspect", "--run-id", rid, "--json", cwd=tmp_path, env=PROG).stdout)["continue_with"] == cmd.group(1)
    # pasted unchanged, the placeholders answer nothing (issue 34 point 3): refused, the run still waits
    refused = subprocess.run(["sh", "-c", cmd.group(1)], cwd=tmp_path, check=False, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "placeholder of the printed command" in refused.stderr, refused.stderr
    filled = cmd.group(1).replace("<low|high>", "low").replace("<true|false>", "true")
    done = subprocess.run(["sh", "-c", filled], cwd=tmp_path, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_inspect_of_a_budget_failure_names_code_message_and_the_raised_cap(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    p = run_cli("run", str(demo / "demo.bot"), "--workspace", str(demo), "--max-iterations", "3", cwd=tmp_path)
    assert p.returncode == 5, p.stderr
    rid = _run_id(p.stderr)
    i = run_cli("inspect", "--run-id", rid, cwd=tmp_path, env=PROG)
    assert "failure: BUDGET_EXCEEDED: budget exceeded: max_iterations cap 3" in i.stdout, i.stdout
    name = json.loads(run_cli("inspect", "--run-id", rid, "--json", cwd=tmp_path).stdout)["name"]
    cmd = re.search(r"^continue with: (.+)$", i.stdout, re.MULTILINE)
    assert cmd and cmd.group(1).endswith(f"resume --run-id {name} --max-iterations 6"), i.stdout
    again = subprocess.run(["sh", "-c", cmd.group(1)], cwd=tmp_path, check=False, capture_output=True, text=True, timeout=120)
    assert again.returncode == 5 and "max_iterations cap 6" in again.stderr, again.stderr  # it went on to 6


def test_resume_answers_file_node_keyed_and_flat(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    for answers in (FIXTURES / "demo" / "answers.json", None):
        ws = tmp_path / f"ws{answers is None}"
        ws.mkdir()
        p = run_cli("run", str(demo / "demo.bot"), "--workspace", str(ws), cwd=tmp_path)
        assert p.returncode == 4, p.stderr
        rid = _run_id(p.stderr)
        if answers is None:
            answers = tmp_path / "flat.json"
            answers.write_text(json.dumps({"approved": True, "note": "flat"}))
        r = run_cli("resume", "--run-id", rid, "--answers-file", str(answers), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        out = json.loads(run_cli("inspect", "--run-id", rid, "--json", cwd=tmp_path).stdout)["outputs"]
        assert out["approve"]["approved"] is True
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"nosuch": {"approved": True}}))
    (tmp_path / "ws0").mkdir()
    p = run_cli("run", str(demo / "demo.bot"), "--workspace", str(tmp_path / "ws0"), cwd=tmp_path)
    r = run_cli("resume", "--run-id", _run_id(p.stderr), "--answers-file", str(wrong), cwd=tmp_path)
    assert r.returncode == 2 and "waits on approve" in r.stderr, r.stderr


# -- point 5 ------------------------------------------------------------------------------------
def test_exit_codes_follow_the_table(tmp_path: Path) -> None:
    bad = write_bot(tmp_path / "bad", "workflow w:\n  entry: nosuch\n")
    assert run_cli("run", str(bad), cwd=tmp_path).returncode == 2
    assert run_cli("validate", str(bad), cwd=tmp_path).returncode == 2
    demo = _demo(tmp_path)
    p = run_cli("run", str(demo / "demo.bot"), "--workspace", str(demo), cwd=tmp_path)
    rid = _run_id(p.stderr)
    missing = run_cli("resume", "--run-id", rid, cwd=tmp_path)
    assert missing.returncode == 2 and "waiting for answers" in missing.stderr
    bot = demo / "demo.bot"
    bot.write_text(bot.read_text().replace("Review this draft about", "Review this, about"))
    changed = run_cli("resume", "--run-id", rid, "--answer", "approved=true", "--answer", "note=x", cwd=tmp_path)
    assert changed.returncode == 2 and "--force" in changed.stderr, changed.stderr
    ok = run_cli("resume", "--run-id", rid, "--force", "--answer", "approved=true", "--answer", "note=x", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    finished = run_cli("resume", "--run-id", rid, cwd=tmp_path)
    assert finished.returncode == 2 and "error:" in finished.stderr
    # damaged store: a missing checkpoint, a corrupt run.json
    p2 = run_cli("run", str(demo / "demo.bot"), "--workspace", str(demo), cwd=tmp_path)
    rid2 = _run_id(p2.stderr)
    run_dir = tmp_path / ".iterion" / "runs" / rid2
    (run_dir / "checkpoint.json").unlink()
    gone = run_cli("resume", "--run-id", rid2, "--answer", "approved=true", "--answer", "note=x", cwd=tmp_path)
    assert gone.returncode == 2 and gone.stderr.startswith("error:"), gone.stderr
    (run_dir / "run.json").write_text("{not json")
    corrupt = run_cli("resume", "--run-id", rid2, "--answer", "approved=true", cwd=tmp_path)
    assert corrupt.returncode == 2 and "internal error" not in corrupt.stderr, corrupt.stderr


SLOW = """
tool first:
  command: "while [ ! -f {gate} ]; do sleep 0.05; done; echo one"

tool second:
  command: "echo two"

workflow slow:
  entry: first
  first -> second
  second -> done
"""


def test_paused_operator_has_its_own_exit_code(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    # `first` runs until the pause request is on disk (then the test opens its gate), so the pause
    # always lands while `first` executes and the run parks at the next boundary, with no fixed wait
    gate = tmp_path_factory.mktemp("gate") / "open"
    bot = write_bot(tmp_path / "wf", SLOW.format(gate=shlex.quote(str(gate))))
    proc = start_cli("run", str(bot), "--workspace", str(tmp_path), cwd=tmp_path)
    runs = tmp_path / ".iterion" / "runs"
    deadline = time.monotonic() + 60
    rid = None
    while rid is None and time.monotonic() < deadline:  # until the run exists and `first` started
        for ev in runs.glob("*/events.jsonl"):
            if '"node_started"' in ev.read_text():
                rid = ev.parent.name
        time.sleep(0.05)
    assert rid, "the run never started"
    pause = start_cli("pause", "--run-id", rid, cwd=tmp_path)
    wait_for_file(runs / rid / "control.json", pause)
    gate.touch()
    _, pause_err = pause.communicate(timeout=120)
    assert pause.returncode in (0, 7), pause_err
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 8 and "paused_operator" in err, err
    assert "resume with:" in err
    assert run_cli("resume", "--run-id", rid, cwd=tmp_path).returncode == 0


# -- point 8 ------------------------------------------------------------------------------------
def _bundle(tmp: Path) -> Path:
    b = tmp / "bot"
    (b / "prompts").mkdir(parents=True)
    (b / "main.bot").write_text((FIXTURES / "demo" / "demo.bot").read_text())
    (b / "manifest.yaml").write_text('name: demo\nversion: "1.0"\n')
    (b / "prompts" / "extra.md").write_text("An extra prompt.\n")
    (b / ".hidden").write_text("left out\n")
    return b


def test_bundle_pack_is_deterministic_and_runs_and_resumes(tmp_path: Path) -> None:
    b = _bundle(tmp_path)
    script = FIXTURES / "demo" / "demo.script.yaml"
    one = run_cli("bundle", "pack", str(b), "-o", str(tmp_path / "one.botz"), "--json", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["members"] == ["main.bot", "manifest.yaml", "prompts/extra.md"]
    later = (b / "main.bot").stat().st_mtime + 3600
    os.utime(b / "main.bot", (later, later))  # a new mtime: same bytes all the same
    assert run_cli("bundle", "pack", str(b), "-o", str(tmp_path / "two.botz"), cwd=tmp_path).returncode == 0
    assert (tmp_path / "one.botz").read_bytes() == (tmp_path / "two.botz").read_bytes()
    assert run_cli("validate", str(tmp_path / "one.botz"), cwd=tmp_path).returncode == 0
    for target in (tmp_path / "one.botz", b):
        ws = tmp_path / f"ws-{target.name}"
        ws.mkdir()
        p = run_cli("run", str(target), "--workspace", str(ws), "--script", str(script), cwd=tmp_path)
        assert p.returncode == 4, p.stderr
        r = run_cli("resume", "--run-id", _run_id(p.stderr), "--answers-file",
                    str(FIXTURES / "demo" / "answers.json"), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (ws / "demo-out" / "published.md").is_file()


def test_bundle_pack_refuses_what_is_not_a_bundle(tmp_path: Path) -> None:
    b = _bundle(tmp_path)
    (b / "link.md").symlink_to(b / "main.bot")
    p = run_cli("bundle", "pack", str(b), cwd=tmp_path)
    assert p.returncode == 2 and "symbolic link" in p.stderr and not (tmp_path / "bot.botz").exists()
    (b / "link.md").unlink()
    (b / "main.bot").write_text("workflow w:\n  entry: nosuch\n")
    p = run_cli("bundle", "pack", str(b), cwd=tmp_path)
    assert p.returncode == 2 and "does not validate" in p.stderr and not (tmp_path / "bot.botz").exists()
    assert run_cli("bundle", "pack", str(tmp_path / "nosuch"), cwd=tmp_path).returncode == 2


def test_run_answers_file_node_keyed_and_flat(tmp_path: Path) -> None:
    demo = _demo(tmp_path)
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"approved": True, "note": "flat"}))
    for answers in (FIXTURES / "demo" / "answers.json", flat):
        ws = tmp_path / f"ws-{answers.name}"
        ws.mkdir()
        p = run_cli("run", str(demo / "demo.bot"), "--workspace", str(ws), "--answers-file", str(answers), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert (ws / "demo-out" / "published.md").is_file()
