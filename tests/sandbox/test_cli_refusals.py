"""Through the CLI: bubblewrap missing refuses a sandboxed run with the install hint (nothing is
created) unless --sandbox none; a container sandbox is refused naming auto/none; a sandbox that
does not start at a node is SANDBOX_SETUP_FAILED and the command never ran; a resume keeps the
recorded flag or replaces it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from iterion.store import Store

from ..conftest import run_cli, write_bot

TOOLS = ("bash", "sh", "git", "python3", "printf", "cat", "env", "ls", "rm", "mkdir", "touch", "test", "true")


def no_bwrap_path(tmp_path: Path) -> str:
    """A PATH holding the usual tools (symlinked) but no bwrap."""
    d = tmp_path / "bin-without-bwrap"
    d.mkdir()
    for name in TOOLS:
        exe = shutil.which(name)
        if exe:
            (d / name).symlink_to(exe)
    return str(d)


def failing_bwrap(tmp_path: Path) -> Path:
    """A directory holding a `bwrap` that passes the start-up trial (`true`) but refuses any real
    command, as a kernel refusing namespaces mid-run would."""
    shim = tmp_path / "shim"
    shim.mkdir()
    real = shutil.which("bwrap")
    (shim / "bwrap").write_text(f'#!/bin/sh\nfor last; do :; done\nif [ "$last" = true ]; then exec {real} "$@"; fi\n'
                                'echo "bwrap: Creating new namespace failed: Operation not permitted" >&2\nexit 1\n')
    (shim / "bwrap").chmod(0o755)
    return shim


def sandboxed_bot(tmp_path: Path, command: str = "printf ran > ran.txt", sandbox: str = "auto") -> Path:
    return write_bot(tmp_path / "src", f"""
        tool t:
          command: "{command}"

        workflow w:
          sandbox: {sandbox}
          entry: t
          t -> done
    """)


def test_bwrap_missing_refuses_with_the_install_hint(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "store"
    p = run_cli("run", str(sandboxed_bot(tmp_path)), "--store-dir", str(store), cwd=ws,
                env={"PATH": no_bwrap_path(tmp_path)})
    assert p.returncode == 2, p.stderr
    assert "bubblewrap" in p.stderr and "apt-get install bubblewrap" in p.stderr and "--sandbox none" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (ws / "ran.txt").exists()
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())  # no run was created

    p = run_cli("run", str(sandboxed_bot(tmp_path)), "--store-dir", str(store), "--sandbox", "none", "--json",
                cwd=ws, env={"PATH": str(tmp_path / "bin-without-bwrap")})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "finished" and (ws / "ran.txt").read_text() == "ran"


def test_a_container_sandbox_is_refused_naming_auto_and_none(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        tool t:
          command: "true"
          sandbox:
            image: "python:3.11"

        workflow w:
          entry: t
          t -> done
    """)
    p = run_cli("run", str(bot), "--store-dir", str(tmp_path / "store"), cwd=ws)
    assert p.returncode == 2, p.stderr
    assert "container" in p.stderr and "sandbox: auto" in p.stderr and "sandbox: none" in p.stderr


def test_a_bad_flag_is_refused(tmp_path: Path, ws: Path) -> None:
    p = run_cli("run", str(sandboxed_bot(tmp_path)), "--store-dir", str(tmp_path / "store"), "--sandbox", "docker",
                cwd=ws)
    assert p.returncode == 2 and "expected auto or none" in p.stderr


def test_a_sandbox_that_does_not_start_at_a_node_is_a_typed_failure(tmp_path: Path, ws: Path) -> None:
    shim = failing_bwrap(tmp_path)
    store = tmp_path / "store"
    p = run_cli("run", str(sandboxed_bot(tmp_path)), "--store-dir", str(store), "--json", cwd=ws,
                env={"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"})
    out = json.loads(p.stdout)
    assert out["failure_code"] == "SANDBOX_SETUP_FAILED", out
    assert "Creating new namespace failed" in out["error"]
    assert not (ws / "ran.txt").exists()  # never run without the sandbox


def test_resume_keeps_the_recorded_flag_or_replaces_it(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        schema ok:
          approved: bool

        tool t:
          command: "printf x > t.txt"

        human gate:
          output: ok
          instructions: "Go on?"

        workflow w:
          sandbox: auto
          entry: gate
          gate -> t
          t -> done
    """)
    store = tmp_path / "store"
    p = run_cli("run", str(bot), "--store-dir", str(store), "--sandbox", "none", "--json", cwd=ws)
    run_id = json.loads(p.stdout)["run_id"]
    assert Store(store).load_run(run_id).options["sandbox"]["flag"] == "none"
    # no bwrap here: the recorded `none` still holds, so the resume needs none
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answer", "approved=true", "--json",
                cwd=ws, env={"PATH": no_bwrap_path(tmp_path)})
    assert json.loads(p.stdout)["status"] == "finished", p.stderr
    resumed = [e for e in Store(store).read_events(run_id) if e.type == "run_resumed"][-1]
    assert resumed.payload["sandbox"]["mode"] == "none"


def test_resume_with_the_flag_replaces_it_and_is_refused_without_bwrap(tmp_path: Path, ws: Path) -> None:
    bot = write_bot(tmp_path / "src", """
        schema ok:
          approved: bool

        tool t:
          command: "printf x > t.txt"

        human gate:
          output: ok
          instructions: "Go on?"

        workflow w:
          entry: gate
          gate -> t
          t -> done
    """)
    store = tmp_path / "store"
    run_id = json.loads(run_cli("run", str(bot), "--store-dir", str(store), "--json", cwd=ws).stdout)["run_id"]
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answer", "approved=true",
                "--sandbox", "auto", cwd=ws, env={"PATH": no_bwrap_path(tmp_path)})
    assert p.returncode == 2 and "apt-get install bubblewrap" in p.stderr
    assert Store(store).load_run(run_id).status.value == "paused_waiting_human"  # the refusal changed nothing
    p = run_cli("resume", "--run-id", run_id, "--store-dir", str(store), "--answer", "approved=true",
                "--sandbox", "auto", "--json", cwd=ws)
    assert json.loads(p.stdout)["status"] == "finished", p.stderr
    assert Store(store).load_run(run_id).options["sandbox"] == {"flag": "auto", "mode": "auto",
                                                                "driver": "bubblewrap", "nodes": ["gate", "t"]}


def test_doctor_says_whether_sandboxing_works(tmp_path: Path) -> None:
    p = run_cli("doctor", "--json", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["sandbox"]["ok"] and "starts a sandbox" in checks["sandbox"]["detail"]
    assert checks["git"]["ok"] and checks["iterion"]["ok"] and p.returncode == 0
    p = run_cli("doctor", cwd=tmp_path, env={"PATH": no_bwrap_path(tmp_path)})
    assert p.returncode == 1
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("-- sandbox:"))
    assert "not installed" in line and "apt-get install bubblewrap" in line
