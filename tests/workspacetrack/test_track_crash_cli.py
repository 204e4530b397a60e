"""A capture SIGKILLed mid-way leaves the store consistent; the `iterion track` commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from typer.testing import CliRunner, Result

from cli.errors import CliError
from cli.main import app
from tests.conftest import REPO_ROOT, run_cli, start_cli
from .track_helpers import L, write
from workspacetrack import TrackError, Tracker
from workspacetrack.capture import PAUSE_HOOK_ENV

RUNNER = CliRunner()


def track(*args: str) -> Result:
    """In-process invocation (the CLI's start-up dominates a subprocess; errors are tested for real below)."""
    return RUNNER.invoke(app, ["track", *args])


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("track", *args, cwd=REPO_ROOT, env=env)


def test_capture_killed_mid_way_leaves_the_store_consistent(ws: Path, store: Path, tmp_path: Path) -> None:
    common = ["--store", str(store), "--workspace", str(ws), "--run-id", "r"]
    assert cli("capture", "--label", "pre:a:0", *common).returncode == 0
    before = (store / "runs" / "r" / "state.json").read_bytes()
    for i in range(50):
        write(ws, f"gen/{i}.txt", f"new content {i}\n")
    marker = tmp_path / "mid-capture"
    proc = start_cli("track", "capture", "--label", "nodes:a:0", *common, cwd=REPO_ROOT,
                     env={PAUSE_HOOK_ENV: str(marker)}, text=False)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "capture never reached the hook"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Objects were written, nothing was committed: the chain still ends at pre:a:0.
    assert (store / "runs" / "r" / "state.json").read_bytes() == before
    t = Tracker(store, ws, "r")
    assert [s.labels for s in t.snapshots()] == [["pre:a:0"]]
    rec = t.capture(L("nodes:a:0"))
    assert "gen/7.txt" in t.manifest(rec.id).entries
    report = t.restore(L("pre:a:0"))
    assert len(report.removed) == 50 and not any((ws / "gen").iterdir())  # emptied directories stay


def test_cli_capture_list_diff_scope_restore_json(ws: Path, store: Path) -> None:
    common = ["--store", str(store), "--workspace", str(ws), "--run-id", "r"]
    out = json.loads(track("capture", "--label", "pre:a:0", "--json", *common).stdout)
    assert out["labels"] == ["pre:a:0"] and out["mode"] == "full"
    write(ws, "src/app.py", "print('v2')\n")
    assert track("capture", "--label", "nodes:a:0", *common).exit_code == 0
    listed = json.loads(track("list", "--json", *common).stdout)
    assert [s["labels"] for s in listed["snapshots"]] == [["pre:a:0"], ["nodes:a:0"]]
    changes = json.loads(track("diff", "pre:a:0", "nodes:a:0", "--json", *common).stdout)
    assert [(c["path"], c["kind"]) for c in changes] == [("src/app.py", "modified")]
    patch = track("diff", "pre:a:0", "nodes:a:0", "--patch", *common).stdout
    assert "-print('v1')" in patch and "+print('v2')" in patch
    scope = json.loads(track("scope", "--pivot", "pre:a:0", "--json", *common).stdout)
    assert scope["paths"] == ["src/app.py"]
    report = json.loads(track("restore", "--pivot", "pre:a:0", "--json", *common).stdout)
    assert report["restored"] == ["src/app.py"] and report["mechanism"] == "workspacetrack"
    assert (ws / "src/app.py").read_text() == "print('v1')\n"
    undone = track("undo", "--bank", report["bank"][:12], *common)
    assert undone.exit_code == 0 and (ws / "src/app.py").read_text() == "print('v2')\n"


def test_cli_user_errors_are_one_line_without_traceback(ws: Path) -> None:
    proc = cli("capture", "--label", "nodes:a:0", "--store", str(ws / "inside"), "--workspace", str(ws),
               "--run-id", "r")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: store ") and "Traceback" not in proc.stderr
    assert "hint:" in proc.stderr
    bad = track("capture", "--label", "nodes-a-0", "--store", str(ws.parent / "s"), "--workspace", str(ws),
                "--run-id", "r")
    assert isinstance(bad.exception, CliError) and bad.exception.message.startswith("boundary label")
    missing = track("scope", "--pivot", "pre:zzz:0", "--store", str(ws.parent / "s"), "--workspace", str(ws),
                    "--run-id", "r")
    assert isinstance(missing.exception, TrackError) and "no boundary pre:zzz:0" in str(missing.exception)


def test_text_listings_keep_one_path_per_line(ws: Path, store: Path) -> None:
    """A file name holding a newline, an escape sequence or a byte that is not UTF-8 is printed
    escaped by diff, scope and restore, so each listing line names exactly one path; --json keeps
    the name as it is."""
    common = ["--store", str(store), "--workspace", str(ws), "--run-id", "r"]
    assert track("capture", "--label", "pre:a:0", *common).exit_code == 0
    write(ws, "two\nlines.txt", "a\n")
    write(ws, "esc\x1b[31m.txt", "b\n")
    (ws / os.fsdecode(b"bad-\xff.txt")).write_bytes(b"c\n")
    assert track("capture", "--label", "nodes:a:0", *common).exit_code == 0
    want = {"two\\nlines.txt", "esc\\x1b[31m.txt", "bad-\\xff.txt"}
    diff = track("diff", "pre:a:0", "nodes:a:0", *common).stdout.splitlines()
    assert {line.split(None, 1)[1] for line in diff} == want
    assert set(track("scope", "--pivot", "pre:a:0", *common).stdout.splitlines()) == want
    changes = json.loads(track("diff", "pre:a:0", "nodes:a:0", "--json", *common).stdout)
    assert "two\nlines.txt" in {c["path"] for c in changes}
    restored = track("restore", "--pivot", "pre:a:0", *common).stdout.splitlines()
    assert {line.split(": ", 1)[1] for line in restored if line.startswith("  removed: ")} == want
    assert not (ws / "two\nlines.txt").exists()
