"""The run never dies of its display (issue 10, point 3, display side), through real shell pipes.

`iterion run long.bot 2>&1 | head -3` used to kill the run on EPIPE and leave it `running` with
no owner. Now a reader that goes away (head, `true`, a closed descriptor) only silences that
stream: the run goes on to its real end (run.json says finished), iterion exits with its
documented code (0 finished), and shutdown prints no "Exception ignored ... BrokenPipeError".
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import iterion_cmd, make_checkout, write_bot

# enough nodes that the display writes well after `head` has gone (what the sleeps ensure); a longer
# chain only repeats the same failing write (40 nodes here cost ~3x the time and proved no more)
NODES = 12


def _long_bot(directory: Path) -> Path:
    """12 tool nodes in a chain: about 24 progress lines. The first two sleep a little so that
    `head` has read its lines and gone before the display writes the next ones."""
    decls = []
    for i in range(NODES):
        pause = "sleep 0.3; " if i < 2 else ""
        decls.append(f'tool t{i}:\n  command: "{pause}echo \'{{}}\'"\n')
    chain = "".join(f"  t{i} -> t{i + 1}\n" for i in range(NODES - 1))
    decls.append(f"workflow long:\n  entry: t0\n{chain}  t{NODES - 1} -> done\n")
    return write_bot(directory, "\n".join(decls), name="long")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    return make_checkout(tmp_path / "ws"), tmp_path / "store", _long_bot(tmp_path / "src")


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in sh, with $ITERION naming the CLI (this interpreter, no PATH needed)."""
    iterion = " ".join(shlex.quote(a) for a in iterion_cmd())
    script = f"ITERION={shlex.quote(iterion)}; {command}"
    return subprocess.run(["sh", "-c", script], check=False, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ})


def _only_run(store: Path) -> dict[str, object]:
    (run_dir,) = (store / "runs").iterdir()
    doc: dict[str, object] = json.loads((run_dir / "run.json").read_text())
    return doc


QUIET_SHUTDOWN = ("Exception ignored", "BrokenPipeError", "Traceback", "internal error")

PIPES = {
    # the case: progress (stderr) and all into head, which leaves after 3 lines
    "both-into-head-3": "$ITERION run {bot} --store-dir {store} 2>&1 | head -3",
    "both-into-head-1": "$ITERION run {bot} --store-dir {store} 2>&1 | head -1",
    # the literal form: stdout into head (the progress on stderr stays readable)
    "stdout-into-head-3": "$ITERION run {bot} --store-dir {store} | head -3",
    # stderr alone into a reader that never reads: every progress line hits EPIPE
    "stderr-into-true": "$ITERION run {bot} --store-dir {store} 2>&1 >/dev/null | true",
    # --json into a reader that left: the final document cannot be written
    "json-into-true": "$ITERION run {bot} --store-dir {store} --json | true",
    "json-into-head-3": "$ITERION run {bot} --store-dir {store} --json | head -3",
    # closed descriptors at start (they are opened on /dev/null, as git does)
    "stderr-closed": "$ITERION run {bot} --store-dir {store} 2>&-",
    "both-closed": "$ITERION run {bot} --store-dir {store} >&- 2>&-",
}


@pytest.mark.parametrize("pipe", sorted(PIPES))
def test_run_finishes_when_its_reader_goes_away(setup: tuple[Path, Path, Path], pipe: str) -> None:
    ws, store, bot = setup
    rc_file = ws.parent / "rc"
    command = PIPES[pipe].format(bot=shlex.quote(str(bot)), store=shlex.quote(str(store)))
    # iterion's exit code: ( cmd; echo $? >&3 ) 3>rc keeps it apart from the pipeline's
    first, _, rest = command.partition(" | ")
    wrapped = f"( {first}; echo $? >&3 ) 3>{shlex.quote(str(rc_file))}" + (f" | {rest}" if rest else "")
    p = _shell(wrapped, ws)
    assert p.returncode == 0, p.stderr
    doc = _only_run(store)
    assert doc["status"] == "finished", doc  # not `running` with no owner
    assert rc_file.read_text().strip() == "0", (rc_file.read_text(), p.stderr)  # 0 finished (README)
    for bad in QUIET_SHUTDOWN:
        assert bad not in p.stderr and bad not in p.stdout, p.stderr
    if pipe.startswith("both-into-head"):
        lines = p.stdout.splitlines()
        # the progress opens with the run's name and id (issue 14 point 6), then the first node
        assert lines[0].startswith("run ") and len(lines) == int(pipe[-1])
        assert lines[1:2] in ([], ["▶ t0 (tool, iteration 0)"])


def test_inspect_events_into_a_gone_reader_exits_0_quietly(setup: tuple[Path, Path, Path]) -> None:
    ws, store, bot = setup
    rc_file = ws.parent / "rc"
    p = _shell(f"$ITERION run {shlex.quote(str(bot))} --store-dir {shlex.quote(str(store))} --json >/dev/null",
               ws)
    assert p.returncode == 0, p.stderr
    run_id = str(_only_run(store)["id"])
    for reader in ("true", "head -3"):
        p = _shell(f"( $ITERION inspect --run-id {run_id} --events --store-dir {shlex.quote(str(store))}; "
                   f"echo $? >&3 ) 3>{shlex.quote(str(rc_file))} | {reader}", ws)
        assert rc_file.read_text().strip() == "0", p.stderr
        assert not any(bad in p.stderr for bad in QUIET_SHUTDOWN), p.stderr
        if reader == "head -3":
            assert p.stdout.splitlines()[0].startswith(f"{run_id} (long-")


def test_resume_finishes_when_its_reader_goes_away(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    ws, store, _ = setup
    bot = write_bot(tmp_path / "gate", """
        schema ok:
          approved: bool

        tool first:
          command: "echo '{}'"

        human gate:
          output: ok
          instructions: go

        prompt go:
          Go on? [y/n]

        tool after:
          command: "sleep 0.3; echo '{}'"

        tool last:
          command: "echo '{}'"

        workflow g:
          entry: first
          first -> gate
          gate -> after
          after -> last
          last -> done
    """)
    rc_file = tmp_path / "rc"
    p = _shell(f"$ITERION run {shlex.quote(str(bot))} --store-dir {shlex.quote(str(store))} 2>/dev/null",
               ws)
    assert p.returncode == 4, p.stderr
    run_id = str(_only_run(store)["id"])
    p = _shell(f"( $ITERION resume --run-id {run_id} --answer approved=true --store-dir "
               f"{shlex.quote(str(store))} 2>&1; echo $? >&3 ) 3>{shlex.quote(str(rc_file))} | head -1", ws)
    assert p.stdout.splitlines() == ["↻ resuming at gate"]
    assert _only_run(store)["status"] == "finished"
    assert rc_file.read_text().strip() == "0"
