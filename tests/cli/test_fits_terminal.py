"""Output that fits the terminal (issue 14, point 6): width from COLUMNS, cuts end with `…`,
`inspect --events` filters and `--follow`, all through the CLI in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import time
import unicodedata
from pathlib import Path

from tests.conftest import iterion_cmd, run_cli, write_bot


def _cols(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def _env(tmp_path: Path, columns: int = 80) -> dict[str, str]:
    return {"ITERION_STORE_DIR": str(tmp_path / "store"), "COLUMNS": str(columns)}


LONG = """
tool make:
  command: "echo made > made.txt"

workflow a_workflow_with_a_rather_long_name_that_cannot_fit_in_eighty_columns:
  entry: make
  make -> done
"""


def test_the_run_list_fits_80_columns_and_cuts_end_with_an_ellipsis(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", LONG)
    done = run_cli("run", str(bot), "--json", cwd=ws, env=_env(tmp_path))
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    narrow = run_cli("inspect", cwd=ws, env=_env(tmp_path, 80)).stdout.splitlines()
    assert all(_cols(line) <= 80 for line in narrow), narrow
    # issue 34: the id is cut first (its short prefix, the ref, stays whole); a name too long
    # for any line (it holds this workflow's name) is cut only after it
    listed = json.loads(run_cli("inspect", "--json", cwd=ws, env=_env(tmp_path)).stdout)[0]
    row = next(line for line in narrow if line.startswith(listed["short_id"] + " "))
    assert run_id not in row and listed["name"][:20] in row
    assert row.split()[1].startswith(listed["short_id"]) and row.split()[1].endswith("…")
    assert "a_workflow_with_a_rather_long_name_that_cannot_fit_in_eighty_columns" not in row
    wide = run_cli("inspect", cwd=ws, env=_env(tmp_path, 400)).stdout
    assert "a_workflow_with_a_rather_long_name_that_cannot_fit_in_eighty_columns" in wide and "…" not in wide


def _demo_run(tmp_path: Path, ws: Path) -> str:
    from tests.conftest import FIXTURES

    bot = ws / "demo.bot"
    for name in ("demo.bot", "demo.script.yaml"):
        (ws / name).write_bytes((FIXTURES / "demo" / name).read_bytes())
    out = run_cli("run", str(bot), "--json", cwd=ws, env=_env(tmp_path))
    assert out.returncode == 4, out.stderr
    return str(json.loads(out.stdout)["run_id"])


def _event_lines(out: str) -> list[list[str]]:
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].count(":") == 2:
            rows.append(parts)
    return rows


def test_events_hide_bookkeeping_by_default_and_filter_by_type_and_node(tmp_path: Path, ws: Path) -> None:
    run_id = _demo_run(tmp_path, ws)
    default = run_cli("inspect", "--run-id", run_id, "--events", cwd=ws, env=_env(tmp_path))
    types = {r[2] for r in _event_lines(default.stdout)}
    assert "node_finished" in types and "run_paused" in types
    assert not types & {"checkpoint_written", "boundary_written"}
    assert all(_cols(line) <= 80 for line in default.stdout.splitlines() if line[:4].strip().isdigit())
    everything = run_cli("inspect", "--run-id", run_id, "--events", "--all", cwd=ws, env=_env(tmp_path))
    assert {"checkpoint_written", "boundary_written"} <= {r[2] for r in _event_lines(everything.stdout)}
    assert len(_event_lines(everything.stdout)) > len(_event_lines(default.stdout))
    typed = _event_lines(run_cli("inspect", "--run-id", run_id, "--type", "node_finished", "--node", "review",
                                 cwd=ws, env=_env(tmp_path)).stdout)
    assert typed and all(r[2] == "node_finished" and r[3] == "review" for r in typed)
    assert len(typed) == 2  # the review loop ran twice
    as_json = run_cli("inspect", "--run-id", run_id, "--type", "checkpoint_written", "--json", cwd=ws,
                      env=_env(tmp_path))
    assert {e["type"] for e in json.loads(as_json.stdout)["events"]} == {"checkpoint_written"}


def test_follow_streams_a_live_run_until_it_ends(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool wait:
          command: "echo started > wait.started; while [ ! -f go.flag ]; do sleep 0.05; done"

        tool after:
          command: "echo after"

        workflow live:
          entry: wait
          wait -> after
          after -> done
    """)
    env = {**os.environ, **_env(tmp_path)}
    run = subprocess.Popen(iterion_cmd("run", str(bot), "--json"), cwd=ws, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (ws / "wait.started").exists():
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.05)
    runs = list((tmp_path / "store" / "runs").iterdir())
    assert len(runs) == 1
    follower = subprocess.Popen(iterion_cmd("inspect", "--run-id", runs[0].name, "--follow"), cwd=ws, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert follower.poll() is None  # still following: the run is live
    (ws / "go.flag").write_text("")
    out, err = follower.communicate(timeout=60)
    run.communicate(timeout=60)
    assert follower.returncode == 0, err
    rows = _event_lines(out)
    assert [r[2] for r in rows if r[2] in ("node_started", "run_finished")] == \
        ["node_started", "node_started", "run_finished"]
    assert rows[-1][2] == "run_finished"


# -- live progress ------------------------------------------------------------------------------
CHAIN = "\n".join([f'tool n{i}:\n  command: "echo {i}"\n' for i in range(6)]) + \
    "\nworkflow chain:\n  entry: n0\n" + "".join(f"  n{i} -> n{i + 1}\n" for i in range(5)) + "  n5 -> done\n"


def _screen(raw: str) -> list[str]:
    """What a terminal shows at the end: lines, with ``ESC[nF ESC[J`` (up n lines, clear) applied."""
    import re

    lines: list[str] = []
    pos = 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", raw.replace("\r\n", "\n"))
    for m in re.finditer(r"\x1b\[(\d+)F\x1b\[J", text):
        lines += text[pos:m.start()].split("\n")[:-1]
        del lines[len(lines) - int(m.group(1)):]
        pos = m.end()
    return lines + text[pos:].split("\n")


def _in_pty(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_live_progress_on_a_terminal_keeps_one_line_per_node(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", CHAIN)
    env = {**os.environ, **_env(tmp_path), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    raw = _in_pty(iterion_cmd("run", str(bot)), ws, env)
    assert "\x1b[1F\x1b[J" in raw  # the running node's live line was redrawn in place
    screen = [line for line in _screen(raw) if line.strip()]
    assert screen[0].startswith("run chain-") and "(" in screen[0]  # name and id first
    done = [line for line in screen if line.startswith("✓ ")]
    assert [line.split()[1] for line in done] == [f"n{i}" for i in range(6)]
    assert "6 nodes" in done[-1] and "elapsed" in done[-1]
    assert not any(line.startswith("▶ ") for line in screen)  # no node left as two lines


def test_live_progress_off_a_terminal_is_plain_lines(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", CHAIN)
    out = run_cli("run", str(bot), cwd=ws, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stderr
    lines = out.stderr.splitlines()
    assert lines[0].startswith("run chain-")
    assert len([line for line in lines if line.startswith("▶ ")]) == 6
    assert len([line for line in lines if line.startswith("✓ ")]) == 6
