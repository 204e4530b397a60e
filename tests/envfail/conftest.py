"""Helpers of the environment-failure tests (issue 10, points 5 and 7).

Every case runs the real CLI in a subprocess and checks three things: the exit code, exactly one
``error:`` line on stderr (never ``internal error`` or a traceback), and that the store is
unchanged (``store_hash`` before and after: every file's bytes and mode, every directory).
Read-only and full disks are real: a read-only bind mount or a small tmpfs (the tests run as
root, who ignores permission bits; without root a chmod makes the read-only directory).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import make_checkout, restore_template, run_cli, save_template, write_bot

IS_ROOT = os.geteuid() == 0

GATED = """
schema ok:
  approved: bool

tool a:
  command: "echo alpha > a.txt && echo alpha"

human gate:
  instructions: "ok?"
  output: ok

tool b:
  command: "echo beta > b.txt && echo beta"

workflow w:
  entry: a
  a -> gate
  gate -> b
  b -> done
"""


def store_hash(root: Path) -> dict[str, str]:
    """Every file (content + mode) and directory under ``root``; a regular file hashes itself."""
    root = Path(root)
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        out[str(d.relative_to(root)) + "/"] = "dir"
        for name in filenames:
            p = d / name
            st = p.lstat()
            digest = hashlib.sha256(_content(p)).hexdigest() if p.is_file() else "special"
            out[str(p.relative_to(root))] = f"{st.st_mode:o}:{digest}"
        dirnames.sort()
    return out


def _content(p: Path) -> bytes:
    """A file's bytes; the run index (iterion/store/runindex.py) as the rows it says: its log
    (``run-index.log``) merged in, as a reader merges it (a write may merge the log into the
    index: the same rows), and without its stamp of the runs/ directory's mtime, which a run
    created and removed again moves on purpose (so the next listing rescans)."""
    data = p.read_bytes()
    if p.name == "run-index.log":
        return b"(merged into run-index.json)"
    if p.name != "run-index.json":
        return data
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    if isinstance(doc, dict):
        doc.pop("runs_mtime_ns", None)
        rows = {r[0]: r for r in doc.get("rows", [])}
        log = p.with_name("run-index.log")
        for line in (log.read_bytes() if log.exists() else b"").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                break
            old = rows.get(row[0])
            if old is None or row[9] >= old[9] or old[2] == "corrupt":  # (IndexRow: version, status)
                rows[row[0]] = row
        doc["rows"] = [rows[k] for k in sorted(rows)]
    return json.dumps(doc, sort_keys=True).encode()


def error_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]


def assert_one_error(proc: subprocess.CompletedProcess[str], code: int = 2, *, mentions: str | None = None) -> str:
    """Exit ``code``, exactly one ``error:`` line (returned), no internal error, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    errors = error_lines(proc)
    assert len(errors) == 1, proc.stderr
    if mentions is not None:
        assert mentions in errors[0], errors[0]
    return errors[0]


class Mounts:
    """Mounts made by one test, unmounted (latest first) at its end."""

    def __init__(self) -> None:
        self.points: list[Path] = []

    def _run(self, *args: str) -> None:
        subprocess.run(list(args), check=True, capture_output=True)

    def tmpfs(self, where: Path, size: str) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        self._run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
        self.points.append(where)
        return where

    def read_only(self, where: Path) -> Path:
        """Make the directory ``where`` read-only for this process (bind+remount as root, else chmod)."""
        if not IS_ROOT:
            for dirpath, dirnames, _ in os.walk(where):
                for d in (dirpath, *(os.path.join(dirpath, n) for n in dirnames)):
                    os.chmod(d, 0o555)
            return where
        self._run("mount", "--bind", str(where), str(where))
        self.points.append(where)
        self._run("mount", "-o", "remount,ro,bind", str(where))
        return where

    def release(self) -> None:
        for point in reversed(self.points):
            subprocess.run(["umount", str(point)], capture_output=True, check=False)
            if os.path.ismount(point):
                subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)
        self.points.clear()


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Mounts]:
    m = Mounts()
    try:
        yield m
    finally:
        m.release()
        if not IS_ROOT:
            for dirpath, dirnames, _ in os.walk(tmp_path):
                for d in (dirpath, *(os.path.join(dirpath, n) for n in dirnames)):
                    os.chmod(d, 0o755)


def launch_paused(ws: Path, store: Path) -> str:
    """A run parked paused_waiting_human at ``gate`` (node a executed); returns its id."""
    bot = write_bot(ws, GATED)
    p = run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws)
    assert p.returncode == 4, p.stderr
    return str(json.loads(p.stdout)["run_id"])


def status_of(store: Path, run_id: str) -> dict[str, object]:
    return dict(json.loads((store / "runs" / run_id / "run.json").read_text()))


@dataclass
class Paused:
    template: Path  # the workspace and store as the paused run left them
    live: Path      # where each case gets its own copy: the paths the run recorded
    ws: Path
    store: Path
    run_id: str

    def fresh(self) -> tuple[Path, Path, str]:
        """A fresh copy of the paused run at its recorded paths: (workspace, store, run id)."""
        restore_template(self.template, self.live)
        return self.ws, self.store, self.run_id


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> Paused:
    """One run parked at its gate per module and worker; every case restores a fresh copy of it to
    the same absolute paths (the run records them), so each case starts from the same bytes."""
    base = tmp_path_factory.mktemp("paused")
    live = base / "live"
    live.mkdir()
    ws = make_checkout(live / "ws")
    store = live / "store"
    run_id = launch_paused(ws, store)
    save_template(live, base / "template")
    return Paused(base / "template", live, ws, store, run_id)
