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
    # False: a missing piece that only slows iterion down or serves a subset (the C extension, the
    # journal, chromium for the web tests, LLM credentials): shown with its fix, exit status kept
    required: bool = True


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


def check_pygit2() -> Check:
    try:
        import pygit2
    except ImportError as exc:
        return Check("pygit2", False, f"cannot be imported: {exc}", "pip install --force-reinstall pygit2")
    return Check("pygit2", True, f"pygit2 {pygit2.__version__}, libgit2 {pygit2.LIBGIT2_VERSION}")


def check_extension() -> Check:
    from workspacetrack.fastext import REBUILD_HINT, status

    kind, detail = status()
    ok = kind in ("built", "pure")
    return Check("C extension", ok, f"{kind}: {detail}" + ("" if ok else " (captures take the slow walk)"),
                 None if ok else REBUILD_HINT, required=False)


def check_journal() -> Check:
    from workspacetrack import inotify

    if inotify.available():
        return Check("change journal", True, "inotify available: captures re-read only what changed")
    return Check("change journal", False, "inotify unavailable here: every capture walks the whole workspace",
                 "run on Linux with a C library that has inotify_init1", required=False)


def check_chromium() -> Check:
    exe = next((w for w in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if w), None)
    if exe is None:
        return Check("chromium", False, "not found (used by the web timeline's browser tests only)",
                     "apt-get install chromium", required=False)
    return Check("chromium", True, f"{exe} (web tests only)")


# the environment variables the backends read credentials and endpoints from (names only are shown)
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def check_llm() -> Check:
    from iterion.backends import get_backend
    from iterion.backends.choice import resolve_backend
    from iterion.backends.registry import canonical_or_none

    present = [v for v in CREDENTIAL_VARS if os.environ.get(v)]
    creds = f"credentials set: {', '.join(present) if present else 'none'}"
    choice = resolve_backend(os.environ)
    name = canonical_or_none(choice.name)
    if name is None:
        return Check("LLM backend", False, f"{choice.name} ({choice.source}) is not a known backend; {creds}",
                     "see `iterion backends` for the names", required=False)
    ok, detail = get_backend(name, {}).availability()
    return Check("LLM backend", ok, f"{choice.name} ({choice.source}): {detail}; {creds}",
                 None if ok else "set the backend's key (see `iterion backends`)", required=False)


def check_store() -> Check:
    from iterion.store.layout import locate_store

    loc = locate_store(None, Path.cwd())
    exists = "exists" if loc.root.is_dir() else "not created yet"
    files = f"files at {loc.root} (found by: {loc.origin}; {exists})"
    if os.environ.get("ITERION_NATS_URL", "").strip():
        return Check("store", True, f"NATS JetStream ($ITERION_NATS_URL), with local {files}")
    return Check("store", True, files)


def check_nats() -> Check | None:
    """Only when $ITERION_NATS_URL is set: a TCP connection to each server (no NATS handshake)."""
    import socket
    from urllib.parse import urlsplit

    raw = os.environ.get("ITERION_NATS_URL", "").strip()
    if not raw or raw.lower() == "off":
        return None
    down = []
    for url in (u.strip() for u in raw.split(",") if u.strip()):
        parts = urlsplit(url if "://" in url else f"nats://{url}")
        try:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), timeout=3):
                pass
        except (OSError, ValueError) as exc:
            down.append(f"{parts.hostname}:{parts.port or 4222} ({exc})")
    if down:
        return Check("nats", False, f"unreachable: {'; '.join(down)}",
                     "start the server, fix $ITERION_NATS_URL, or unset it to use files")
    return Check("nats", True, f"reachable: {raw}")


CHECKS: tuple[Callable[[], Check | None], ...] = (
    check_iterion, check_python, check_git, check_pygit2, check_extension, check_journal, check_sandbox,
    check_chromium, check_llm, check_store, check_nats)


def run_checks() -> list[Check]:
    return [c for c in (fn() for fn in CHECKS) if c is not None]


def doctor_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON: {ok, checks: [{name, ok, detail, fix, required}]}."),
) -> None:
    """Check what iterion needs here: one line per check, with the fix for what is missing.

    "ok" passes, "--" fails a required check, "!!" marks an optional one (the C extension, the
    change journal, chromium for the web tests, LLM credentials): iterion works without it.
    Exit status 0 when every required check passes, 1 otherwise. Credentials are named, never shown.

    Example: iterion doctor --json
    """
    checks = run_checks()
    ok = all(c.ok or not c.required for c in checks)
    if as_json:
        echo_json({"ok": ok, "checks": [asdict(c) for c in checks]})
    else:
        for c in checks:
            mark = "ok " if c.ok else ("-- " if c.required else "!! ")
            echo(f"{mark}{c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else ""))
    if not ok:
        raise typer.Exit(ExitCode.FAILED)


def register(app: typer.Typer) -> None:
    app.command("doctor", help="Check what iterion needs on this machine (git, bubblewrap...), with fixes.\n\n"
                               "Example: iterion doctor --json")(doctor_cmd)
