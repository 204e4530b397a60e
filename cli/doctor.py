"""`iterion doctor`: one line per check of what iterion needs on this machine, with the fix where
something is missing.

Each check is a small function returning a ``Check``; ``CHECKS`` lists them in print order, so a
new line is one function and one entry (issue 32 adds more).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import typer

from cli.exit_codes import ExitCode
from cli.output import echo, echo_json


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None


def check_iterion() -> Check:
    from iterion import __version__

    return Check("iterion", True, __version__)


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, f"{platform.python_version()} at {sys.executable}",
                 None if ok else "install Python 3.11 or newer")


def check_git() -> Check:
    exe = shutil.which("git")
    if exe is None:
        return Check("git", False, "not found on PATH", "install git (Debian/Ubuntu: apt-get install git)")
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20,
                             stdin=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("git", False, f"{exe} does not run: {exc}", "reinstall git")
    return Check("git", True, f"{out} at {exe}")


def check_sandbox() -> Check:
    """bubblewrap on PATH, and a real sandbox started around ``true`` in the current directory."""
    from iterion.sandbox import INSTALL_HINT
    from iterion.sandbox.bubblewrap import BubblewrapDriver
    from iterion.sandbox.driver import Op, Plan

    driver = BubblewrapDriver()
    why = driver.unavailable()
    if why is not None:
        return Check("sandbox", False, f"{why}: `sandbox: auto` runs are refused here", INSTALL_HINT)
    cwd = Path(os.path.realpath(Path.cwd()))
    failed = driver.trial(Plan(workspace=cwd, ops=(Op("bind", cwd),)))
    if failed is not None:
        return Check("sandbox", False, failed,
                     "bubblewrap needs user namespaces (sysctl kernel.unprivileged_userns_clone=1) or root; "
                     "or run with --sandbox none")
    return Check("sandbox", True, f"bubblewrap at {driver.executable()} starts a sandbox here")


CHECKS: tuple[Callable[[], Check], ...] = (check_iterion, check_python, check_git, check_sandbox)


def run_checks() -> list[Check]:
    return [fn() for fn in CHECKS]


def doctor_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON: {ok, checks: [{name, ok, detail, fix}]}."),
) -> None:
    """Check what iterion needs here: one line per check, with the fix for what is missing.

    Exit status 0 when every check passes, 1 otherwise.

    Example: iterion doctor --json
    """
    checks = run_checks()
    ok = all(c.ok for c in checks)
    if as_json:
        echo_json({"ok": ok, "checks": [asdict(c) for c in checks]})
    else:
        for c in checks:
            echo(f"{'ok ' if c.ok else '-- '}{c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else ""))
    if not ok:
        raise typer.Exit(ExitCode.FAILED)


def register(app: typer.Typer) -> None:
    app.command("doctor", help="Check what iterion needs on this machine (git, bubblewrap...), with fixes.\n\n"
                               "Example: iterion doctor --json")(doctor_cmd)
