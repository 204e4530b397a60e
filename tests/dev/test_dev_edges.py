"""`iterion dev` beyond the main loop (issue 34 point 1): a save during a node is applied at the
node boundary (the node finishes, it is not killed); `--confirm` asks and a no changes nothing;
`q` while a node runs parks the run resumable; Ctrl-C twice never leaves it `running`; a dev
session attaches only to a run of its own file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect

from tests.conftest import cli_env, make_checkout, run_cli

FLOW = """\
schema note:
  system: string
  user: string

schema pick:
  ok: bool

agent write:
  backend: "script"
  output: note
  user: "Write about {topic}."

tool save:
  command: "printf 'saved\\n' >> out.txt"

human review:
  output: pick
  instructions: "Ship it?"

workflow slow:
  entry: write
  write -> save
  save -> review
  review -> done
"""


GATE = r"ok \[y/n\]: "  # the gate's field, asked at once


def _setup(tmp_path: Path, sleep_s: float) -> tuple[Path, Path, Path]:
    ws = make_checkout(tmp_path / "ws")
    src = tmp_path / "src"
    src.mkdir()
    bot = src / "wf.bot"
    bot.write_text(FLOW.format(topic="rivers"))
    (src / "wf.script.yaml").write_text(f'write:\n  "*": {{echo: true, sleep_s: {sleep_s}}}\n')
    return ws, tmp_path / "store", bot


def _spawn(args: list[str], cwd: Path) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "cli.main", *args], cwd=str(cwd), env=cli_env({"NO_COLOR": "1"}),
                         encoding="utf-8", timeout=90, dimensions=(40, 160))


def _events(store: Path) -> list[dict[str, object]]:
    (run_dir,) = [p for p in (store / "runs").iterdir() if p.is_dir()]
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _status(store: Path, ws: Path) -> dict[str, object]:
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    return dict(run)


def _exit(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return int(child.exitstatus)


def test_a_save_during_a_node_is_applied_at_its_boundary(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 2)
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.1"], ws)
    child.expect("write")  # the node is running (its started line)
    bot.write_text(FLOW.format(topic="lakes"))
    child.expect("pausing at the next node boundary")
    child.expect("impacts write")
    child.expect("rewound to write")
    child.expect(GATE)
    child.sendline("q")
    assert _exit(child) == 0
    kinds = [(e["type"], e.get("node")) for e in _events(store)]
    first_finish = kinds.index(("node_finished", "write"))
    assert ("node_failed", "write") not in kinds  # not killed: the first execution finished
    paused = [k for k, _ in kinds].index("run_paused")  # the pause point: after the node, before the next
    assert first_finish < paused < kinds.index(("node_started", "save"))
    assert kinds.count(("node_started", "save")) == 1  # `save` ran only after the edit was applied
    assert kinds.count(("node_started", "write")) == 2
    assert (ws / "out.txt").read_text() == "saved\n"


def test_confirm_asks_and_no_changes_nothing(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 0)
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.1", "--confirm"], ws)
    child.expect(GATE)
    bot.write_text(FLOW.format(topic="lakes"))
    child.expect("would be removed out.txt")
    child.expect(r"rewind to write and resume\? \[y/n\]: ")
    child.sendline("n")
    child.expect("not applied")
    assert [e.get("node") for e in _events(store) if e["type"] == "node_started"] == ["write", "save", "review"]
    bot.write_text(FLOW.format(topic="seas"))
    child.expect(r"rewind to write and resume\? \[y/n\]: ")
    child.sendline("y")
    child.expect("rewound to write")
    child.expect(GATE)
    child.sendline("q")
    assert _exit(child) == 0
    assert [e.get("node") for e in _events(store) if e["type"] == "node_started"].count("write") == 2


def test_q_while_a_node_runs_parks_the_run_resumable(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 2)
    child = _spawn(["dev", str(bot), "--store-dir", str(store)], ws)
    child.expect("write")
    child.sendline("q")
    child.expect("quitting: pausing at the next node boundary")
    child.expect("continue with: ")
    assert _exit(child) == 0
    assert _status(store, ws)["status"] == "paused_operator"
    assert ("node_finished", "write") in [(e["type"], e.get("node")) for e in _events(store)]


def test_ctrl_c_twice_never_leaves_the_run_running(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 30)
    child = _spawn(["dev", str(bot), "--store-dir", str(store)], ws)
    child.expect("write")
    child.sendintr()
    child.sendintr()
    code = _exit(child)
    status = _status(store, ws)["status"]
    assert status == "cancelled", (status, code, child.before)
    assert code == 6
    # resumable later, from a new dev session
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--run-id", str(_status(store, ws)["name"])], ws)
    child.expect("attached to run")
    child.expect("q quits")
    child.sendline("q")
    assert _exit(child) in (0, 6)


def test_attach_refuses_a_run_of_another_file(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 0)
    p = run_cli("run", str(bot), "--store-dir", str(store), "--no-input", cwd=ws)
    assert p.returncode == 4, p.stderr
    other = bot.with_name("other.bot")
    other.write_text(FLOW.format(topic="x"))
    name = str(_status(store, ws)["name"])
    p = run_cli("dev", str(other), "--store-dir", str(store), "--run-id", name, cwd=ws)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert f"is a run of {bot}" in p.stderr
    assert _status(store, ws)["status"] == "paused_waiting_human"  # untouched


def test_a_persons_edit_of_a_produced_file_is_always_asked_about(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 0)
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.1"], ws)  # no --confirm
    child.expect(GATE)
    (ws / "out.txt").write_text("my own notes\n")  # a person edits what the run wrote
    bot.write_text(FLOW.format(topic="lakes"))
    child.expect("would be overwritten out.txt")
    child.expect(r"rewind to write and resume \(it overwrites files the run did not write\)\? \[y/n\]: ")
    child.sendline("n")
    child.expect("not applied")
    child.sendline("q")
    assert _exit(child) == 0
    assert (ws / "out.txt").read_text() == "my own notes\n"  # kept
    assert [e.get("node") for e in _events(store) if e["type"] == "node_started"] == ["write", "save", "review"]


def test_dev_never_rewinds_another_run(tmp_path: Path) -> None:
    ws, store, bot = _setup(tmp_path, 0)
    other_ws = make_checkout(tmp_path / "other")
    p = run_cli("run", str(bot), "--store-dir", str(store), "--no-input", "--workspace", str(other_ws), cwd=ws)
    assert p.returncode == 4, p.stderr
    (other,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    other_events = (store / "runs" / other["id"] / "events.jsonl").read_text()
    child = _spawn(["dev", str(bot), "--store-dir", str(store), "--debounce", "0.1"], ws)
    child.expect(GATE)
    bot.write_text(FLOW.format(topic="lakes"))
    child.expect("rewound to write")
    child.expect(GATE)
    child.sendline("q")
    assert _exit(child) == 0
    assert (store / "runs" / other["id"] / "events.jsonl").read_text() == other_events  # untouched
    assert (other_ws / "out.txt").read_text() == "saved\n"
