"""Issue 34 point 1: `iterion dev` through a real pty (pexpect), as an author works.

Start; edit the prompt file (imported by the main file) twice, with an invalid save in between;
see the rewind report name exactly the affected nodes, the produced file put back and only those
nodes re-run; every save arrives while a gate's question is open (it is withdrawn, then asked
again); answer a gate at the prompt; quit at the next one; attach again later and finish the run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect

from tests.conftest import cli_env, make_checkout, run_cli

MAIN = """\
import "prompts.bot"

schema note:
  system: string
  user: string

schema pick:
  ok: bool

tool prep:
  command: "printf 'prep\\n' >> prep.log"

agent write:
  backend: "script"
  output: note
  user: write_user

tool save:
  command: "printf 'saved\\n' >> out.txt"

human review:
  output: pick
  instructions: "Ship it?"

tool ship:
  command: "printf 'shipped\\n' >> ship.log"

human final:
  output: pick
  instructions: "All done?"

workflow devloop:
  entry: prep
  prep -> write
  write -> save
  save -> review
  review -> ship
  ship -> final
  final -> done
"""

PROMPTS = 'prompt write_user:\n  Write about {version}.\n'
SCRIPT = 'write:\n  "*": {echo: true}\n'
GATE = r"ok \[y/n\]: "  # a gate's field, asked at once
WITHDRAWN = "the workflow changed: the question is withdrawn"


def _spawn(args: list[str], cwd: Path) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "cli.main", *args], cwd=str(cwd), env=cli_env({"NO_COLOR": "1"}),
                         encoding="utf-8", timeout=90, dimensions=(40, 160))


def _events(store: Path, ws: Path, run: str) -> list[dict[str, object]]:
    p = run_cli("inspect", "--run-id", run, "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 0, p.stderr
    return dict(json.loads(p.stdout))  # type: ignore[return-value]


def _started(store: Path, ws: Path) -> list[str]:
    """The nodes started, in order, from the run's event log."""
    (run_dir,) = [p for p in (store / "runs").iterdir() if p.is_dir()]
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e["node"] for e in map(json.loads, lines) if e["type"] == "node_started"]


def test_dev_loop_edit_invalid_edit_gate_quit_attach(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    src = tmp_path / "src"
    src.mkdir()
    bot = src / "wf.bot"
    bot.write_text(MAIN)
    prompts = src / "prompts.bot"
    prompts.write_text(PROMPTS.format(version="rivers"))
    (src / "wf.script.yaml").write_text(SCRIPT)
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.2"], ws)
    child.expect(r"watching 2 file\(s\)")
    child.expect("review asks:")  # asked at once, as `iterion run` asks; the watch goes on beside
    child.expect("Ship it")
    child.expect(GATE)
    assert (ws / "out.txt").read_text() == "saved\n"
    # 1. an edit of the prompt while the question is open: withdrawn, then the report, the rewind
    # to `write`, out.txt put back, write+save re-run, and the gate asked again
    prompts.write_text(PROMPTS.format(version="lakes"))
    child.expect(WITHDRAWN)
    child.expect("detected changes")
    child.expect("impacts write")
    child.expect("dry run: would rewind run .*: review -> write")
    child.expect("would be removed out.txt")
    child.expect("rewound to write")
    child.expect("review asks:")
    child.expect(GATE)
    assert (ws / "out.txt").read_text() == "saved\n"  # put back, then written once more
    assert (ws / "prep.log").read_text() == "prep\n"  # prep was not re-run
    # 2. an invalid save changes nothing: the same question is asked again
    prompts.write_text("prompt write_user\n  broken\n")
    child.expect(WITHDRAWN)
    child.expect(r"prompts.bot:\d+:\d+: ")
    child.expect("invalid: nothing changed")
    child.expect("review asks:")
    child.expect(GATE)
    # 3. fixed: applied again
    prompts.write_text(PROMPTS.format(version="seas"))
    child.expect(WITHDRAWN)
    child.expect("impacts write")
    child.expect("rewound to write")
    child.expect(GATE)
    assert _started(store, ws) == ["prep", "write", "save", "review", "write", "save", "review",
                                   "write", "save", "review"]
    # 4. the gate, answered at the prompt; the run goes on to the next gate; q there quits
    child.sendline("y")
    child.expect("final asks:")
    child.expect("All done")
    child.expect(GATE)
    child.sendline("q")
    child.expect("paused_waiting_human")
    child.expect("continue with: ")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    assert run["status"] == "paused_waiting_human"
    # 5. later: attach and finish
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--run-id", run["name"]], ws)
    child.expect("attached to run")
    child.expect("final asks:")
    child.expect(GATE)
    child.sendline("y")
    child.expect("finished")
    child.sendline("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    detail = _events(store, ws, run["name"])
    assert detail["status"] == "finished"
    assert detail["outputs"]["write"]["user"].strip() == "Write about seas."  # type: ignore[index]
    assert (ws / "ship.log").read_text() == "shipped\n"
