"""Running a tool's shell command or script as a child process in its own process group.

Its own group (``start_new_session``) is what lets a cancel kill the whole pipeline the command
started - ``sh -c "a | b"`` forks grandchildren a plain ``proc.kill()`` would orphan.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from iterion.engine.cancel import CancelToken, kill_group
from iterion.engine.errors import Cancelled

# script languages -> the interpreter that runs a script file
_INTERPRETERS: dict[str, list[str]] = {
    "sh": ["sh"],
    "bash": ["bash"],
    "python": [sys.executable],
    "node": ["node"],
}
_SUFFIX = {"sh": ".sh", "bash": ".sh", "python": ".py", "node": ".js"}


@dataclass(frozen=True)
class ProcResult:
    stdout: str
    stderr: str
    exit_code: int


class ToolLaunchError(Exception):
    """The command could not be started at all (interpreter missing, bad cwd)."""


def script_argv(language: str, script_path: Path) -> list[str]:
    lang = (language or "sh").lower()
    if lang not in _INTERPRETERS:
        raise ToolLaunchError(f"unknown script language {language!r} (one of {', '.join(_INTERPRETERS)})")
    interp = _INTERPRETERS[lang]
    if shutil.which(interp[0]) is None and not os.path.isabs(interp[0]):
        raise ToolLaunchError(f"the {lang} interpreter ({interp[0]}) is not on PATH")
    return [*interp, str(script_path)]


def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], token: CancelToken,
                poll: float = 0.1, check: Callable[[], None] | None = None) -> ProcResult:
    """Run ``argv`` to completion, or kill its process group and raise Cancelled on cancel.

    ``check`` is called while the process runs (e.g. the run's duration cap); whatever it raises
    kills the process group and propagates."""
    token.check()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise ToolLaunchError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    with token.process_group(proc.pid):
        while True:
            try:
                out, err = proc.communicate(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                if token.cancelled:
                    kill_group(proc.pid)
                    proc.communicate()
                    raise Cancelled(token.reason or "cancelled") from None
                if check is not None:
                    try:
                        check()
                    except BaseException:
                        kill_group(proc.pid)
                        proc.communicate()
                        raise
    if token.cancelled:
        # finished in the same instant as the cancel: the cancel still wins (the run stops)
        raise Cancelled(token.reason or "cancelled")
    return ProcResult(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), proc.returncode)


def run_command(command: str, *, cwd: Path, env: dict[str, str], token: CancelToken,
                check: Callable[[], None] | None = None) -> ProcResult:
    return run_process(["/bin/sh", "-c", command], cwd=cwd, env=env, token=token, check=check)


def run_script(script: str, language: str, *, cwd: Path, env: dict[str, str], token: CancelToken,
               check: Callable[[], None] | None = None) -> ProcResult:
    # The script file lives outside the workspace so it never shows up in a boundary.
    lang = (language or "sh").lower()
    fd, name = tempfile.mkstemp(prefix="iterion-tool-", suffix=_SUFFIX.get(lang, ""))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(script)
        return run_process(script_argv(lang, Path(name)), cwd=cwd, env=env, token=token, check=check)
    finally:
        os.unlink(name)
