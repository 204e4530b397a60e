"""`iterion dev` at a human gate (issue 34): the fields are asked at once while the watch goes
on. A save while a question is open withdraws it (half an answer is dropped: the half-typed line
and the fields already answered), is applied as any save (rewind --auto, resume --force), and the
gate's fields are asked again from the first when the run parks there again. Ctrl-C at a
question quits and leaves the run parked, never cancelled. Through a real pty (pexpect)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pexpect

from tests.conftest import cli_env, make_checkout, run_cli, start_cli

FLOW = """\
schema note:
  system: string
  user: string

schema pick:
  ok: bool
  why: string

agent write:
  backend: "script"
  output: note
  user: "Write about {topic}."

tool save:
  command: "printf 'saved\\n' >> out.txt"

human review:
  output: pick
  instructions: "Ship it?"

workflow gated:
  entry: write
  write -> save
  save -> review
  review -> done
"""

OK = r"ok \[y/n\]: "
WHY = r"why \(string"
WITHDRAWN = "the workflow changed: the question is withdrawn; applying the save"


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    ws = make_checkout(tmp_path / "ws")
    src = tmp_path / "src"
    src.mkdir()
    bot = src / "wf.bot"
    bot.write_text(FLOW.format(topic="rivers"))
    (src / "wf.script.yaml").write_text('write:\n  "*": {echo: true}\n')
    return ws, tmp_path / "store", bot


def _spawn(args: list[str], cwd: Path) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "cli.main", *args], cwd=str(cwd), env=cli_env({"NO_COLOR": "1"}),
                         encoding="utf-8", timeout=90, dimensions=(40, 160))


def _inspect(store: Path, ws: Path) -> dict[str, object]:
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    p = run_cli("inspect", "--run-id", run["id"], "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    return dict(json.loads(p.stdout))


def _started(store: Path) -> list[str]:
    (run_dir,) = [p for p in (store / "runs").iterdir() if p.is_dir()]
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e["node"] for e in map(json.loads, lines) if e["type"] == "node_started"]


def test_a_save_while_a_question_is_open_withdraws_it_and_asks_again(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path)
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.1"], ws)
    child.expect("review asks:")
    child.expect(OK)
    child.sendline("y")  # the first field answered...
    child.expect(WHY)
    child.send("half an ans")  # ...the second half typed, not sent
    bot.write_text(FLOW.format(topic="lakes"))
    child.expect(WITHDRAWN)
    child.expect("impacts write")
    child.expect("rewound to write")
    child.expect("resuming with --force")
    child.expect("review asks:")  # parked at the gate again: asked again, from the first field
    child.expect(OK)
    assert _started(store) == ["write", "save", "review", "write", "save", "review"]
    child.sendline("n")
    child.expect(WHY)
    child.sendline("after the edit")
    child.expect("finished")
    child.sendline("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    detail = _inspect(store, ws)
    assert detail["status"] == "finished"
    # nothing of the withdrawn answers reached the run: neither the `y` nor the half-typed line
    assert detail["outputs"]["review"] == {"ok": False, "why": "after the edit"}  # type: ignore[index]
    assert detail["outputs"]["write"]["user"].strip() == "Write about lakes."  # type: ignore[index]
    assert (ws / "out.txt").read_text() == "saved\n"  # put back by the rewind, written once more
    # the answers resumed the gate itself (its resumed start): nothing before it ran a third time
    assert _started(store) == ["write", "save", "review", "write", "save", "review", "review"]


def test_ctrl_c_at_a_question_quits_and_leaves_the_run_parked(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path)
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.1"], ws)
    child.expect(OK)
    child.sendintr()
    child.expect("paused_waiting_human")
    child.expect("continue with: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    detail = _inspect(store, ws)
    assert detail["status"] == "paused_waiting_human"
    assert detail["pending"]["node"] == "review"  # type: ignore[index]
    assert _started(store) == ["write", "save", "review"]


def test_off_a_terminal_nothing_is_asked_and_q_quits(tmp_path: Path) -> None:
    """stdin a pipe: the gate is shown, no field is read from stdin; a typed `q` quits, parked."""
    ws, store, bot = _setup(tmp_path)
    proc = start_cli("dev", str(bot), "--store-dir", str(store), "--debounce", "0.1", cwd=ws,
                     stdin=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None and proc.stdin is not None
    lines = []
    for line in proc.stdout:  # until the gate is shown
        lines.append(line)
        if "waiting at the gate" in line:
            break
    assert any("review asks: Ship it" in x for x in lines), lines
    proc.stdin.write("q\n")
    proc.stdin.flush()
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "[y/n]" not in "".join(lines) + rest  # never asked
    assert _inspect(store, ws)["status"] == "paused_waiting_human"
