"""Issue 34 point 3: a run parked at a human gate is answered at the terminal, field by field.

Driven through a real pty (pexpect), as a person types: every field type, wrong values asked
again, no default (Enter on a bool or an enum asks again), Ctrl-D leaves the run parked, and
``--no-input`` keeps the old behaviour (the summary, exit 4, nothing read).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect

from tests.conftest import cli_env, make_checkout, run_cli, write_bot

FORM = """
schema form:
  level: string [enum: "low", "high"]
  ok: bool
  note: string
  body: string
  count: int
  ratio: float
  tags: string[]
  meta: json
  doc: file

human ask:
  output: form
  instructions: "Fill the form"

workflow gate:
  entry: ask
  ask -> done
"""

SMALL = """
schema pick:
  ok: bool

human ask:
  output: pick
  instructions: "Ship it?"

workflow small:
  entry: ask
  ask -> done
"""


def _spawn(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "cli.main", *args], cwd=str(cwd), env=cli_env(env),
                         encoding="utf-8", timeout=90, dimensions=(40, 160))


def _finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return int(child.exitstatus)


def _detail(rid_or_name: str, store: Path, cwd: Path) -> dict[str, object]:
    p = run_cli("inspect", "--run-id", rid_or_name, "--store-dir", str(store), "--json", cwd=cwd)
    assert p.returncode == 0, p.stderr
    return dict(json.loads(p.stdout))


def test_every_field_type_is_asked_typed_and_the_run_goes_on(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", FORM)
    (tmp_path / "body.txt").write_text("from a file\n")
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4 fake\n")
    editor = tmp_path / "editor.sh"  # a person writing two lines in their editor
    editor.write_text("#!/bin/sh\nprintf 'line one\\nline two\\n' > \"$1\"\n")
    editor.chmod(0o755)
    child = _spawn(["run", str(bot), "--store-dir", str(store)], ws,
                   {"EDITOR": str(editor), "VISUAL": None, "NO_COLOR": "1"})
    child.expect("Fill the form")
    child.expect(r"level \(1-2 or a value\): ")
    child.sendline("")  # Enter is no answer
    child.expect("there is no default")
    child.expect(r"level \(1-2")
    child.sendline("2")
    child.expect(r"ok \[y/n\]: ")
    child.sendline("")
    child.expect("there is no default")
    child.expect(r"ok \[y/n\]: ")
    child.sendline("y")
    child.expect(r"note \(string; @path reads a file, Enter opens \$EDITOR\): ")
    child.sendline("")  # the editor writes a multi-line answer
    child.expect(r"body \(string; ")
    child.sendline(f"@{tmp_path / 'body.txt'}")
    child.expect(r"count \(int\): ")
    child.sendline("many")
    child.expect("not a valid int")
    child.expect(r"count \(int\): ")
    child.sendline("7")
    child.expect(r"ratio \(float\): ")
    child.sendline("0.5")
    child.expect(r"tags \(string\[\]; ")
    child.sendline("a, b")
    child.expect(r"meta \(json; ")
    child.sendline('{"k": [1, 2]}')
    child.expect(r"doc \(file: a path to upload\): ")
    child.sendline(str(tmp_path / "missing.pdf"))
    child.expect("is not a readable file")
    child.sendline(str(tmp_path / "doc.pdf"))
    code = _finish(child)
    out = child.before or ""
    assert code == 0, out
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    detail = _detail(run["id"], store, ws)
    assert detail["status"] == "finished"
    answers = detail["outputs"]["ask"]  # type: ignore[index]
    doc = answers.pop("doc")
    assert answers == {"level": "high", "ok": True, "note": "line one\nline two", "body": "from a file",
                       "count": 7, "ratio": 0.5, "tags": ["a", "b"], "meta": {"k": [1, 2]}}
    assert Path(doc).read_bytes() == b"%PDF-1.4 fake\n"  # staged as the gate's upload


def test_no_input_keeps_the_summary_ctrl_d_leaves_it_parked_and_resume_asks(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", SMALL)
    env = {"NO_COLOR": "1"}
    # --no-input on a terminal: nothing asked, the old summary and exit 4
    child = _spawn(["run", str(bot), "--store-dir", str(store), "--no-input"], ws, env)
    child.expect("answer with: ")
    assert _finish(child) == 4
    assert "[y/n]" not in (child.before or "")
    (run,) = json.loads(run_cli("inspect", "--store-dir", str(store), "--json", cwd=ws).stdout)
    # resume on a terminal asks; Ctrl-D stops asking and the run stays parked, answerable later
    child = _spawn(["resume", "--run-id", run["name"], "--store-dir", str(store)], ws, env)
    child.expect("Ship it")
    child.expect(r"ok \[y/n\]: ")
    child.sendeof()
    child.expect("not answered: the run stays parked")
    child.expect("answer with: ")
    assert _finish(child) == 4
    assert _detail(run["id"], store, ws)["status"] == "paused_waiting_human"
    child = _spawn(["resume", "--run-id", run["name"], "--store-dir", str(store)], ws, env)
    child.expect(r"ok \[y/n\]: ")
    child.sendline("n")
    assert _finish(child) == 0, child.before
    detail = _detail(run["id"], store, ws)
    assert detail["status"] == "finished" and detail["outputs"] == {"ask": {"ok": False}}  # type: ignore[comparison-overlap]


def test_off_a_terminal_nothing_is_read(tmp_path: Path) -> None:
    ws = make_checkout(tmp_path / "ws")
    store = tmp_path / "store"
    bot = write_bot(tmp_path / "src", SMALL)
    p = run_cli("run", str(bot), "--store-dir", str(store), cwd=ws, input="y\n")  # stdin a pipe
    assert p.returncode == 4, p.stderr
    assert "[y/n]" not in p.stdout + p.stderr and "answer with: " in p.stderr
    assert os.fspath(store) in p.stderr  # stored in: names it
