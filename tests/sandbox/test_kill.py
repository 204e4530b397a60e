"""A SIGKILL of iterion (nothing runs its cleanup) takes every process inside the sandbox with it:
bwrap's --die-with-parent ends the sandbox, and its PID namespace ends every process in it, the
ones a tool left in the background included. Found by pid from outside the namespace."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from ..conftest import start_cli, write_bot
from .conftest import PROBE


def marked(marker: str) -> list[int]:
    """Live (non-zombie) sleepers of probe.py carrying ``marker``: the interpreter itself, not the
    shells that started it nor a launcher shim passing the same arguments on (pyenv's)."""
    wanted = [str(PROBE).encode(), b"sleep", marker.encode()]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(") ", 1)[1][0]
        except OSError:
            continue
        if cmdline.split(b"\0")[1:4] == wanted and state != "Z":
            found.append(int(entry))
    return found


def test_sigkill_of_iterion_kills_everything_in_the_sandbox(tmp_path: Path, ws: Path) -> None:
    marker = f"iterion-sbx-{uuid.uuid4().hex}"
    sleeper = f"python3 {PROBE} sleep {marker}"
    bot = write_bot(tmp_path / "src", f"""
        tool t:
          command: "({sleeper} &) ; {sleeper} & {sleeper}"

        workflow w:
          sandbox: auto
          entry: t
          t -> done
    """)
    proc = start_cli("run", str(bot), "--store-dir", str(tmp_path / "store"), cwd=ws, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(marked(marker)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        inside = marked(marker)
        assert len(inside) == 3, (inside, proc.poll())
        os.kill(proc.pid, signal.SIGKILL)  # iterion alone: bwrap and the sandbox get no signal from us
        proc.wait()
        killed_at = time.monotonic()
        deadline = killed_at + 10
        while marked(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marked(marker) == [], "processes inside the sandbox outlived iterion"
        print(f"sandbox gone {time.monotonic() - killed_at:.3f}s after the SIGKILL")
    finally:
        for pid in marked(marker):  # only on failure: never leave them behind
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
