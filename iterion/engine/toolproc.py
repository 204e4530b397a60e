"""Running a tool's shell command or script as a child process in its own process group.

Its own group (``start_new_session``) is what lets a cancel kill the whole pipeline the command
started - ``sh -c "a | b"`` forks grandchildren a plain ``proc.kill()`` would orphan - and what
finds the background children a shell leaves behind when it exits (``procgroup``). It runs under
the launcher (``iterion.engine.tether``), so the group dies with the iterion process, and it is
recorded in the run document while it lives (``iterion.engine.children``).

Its stdout and stderr go straight to files (beside the run when the caller names where,
``keep_output``), and only a bounded head of each is read back (``iterion.engine.outputcap``).

The command text reaching ``sh -c`` is already safe: every substituted value was written as a
single-quoted shell word by ``iterion.templates.render`` (``iterion.shellquote``). The argv is
fixed (``bash -c TEXT`` or ``INTERPRETER FILE``); the script file is a fresh temporary file
outside the workspace, created with ``mkstemp`` (no name a value could choose).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from gitrefs.persist.envsettings import EnvSettingError
from iterion.engine.cancel import CancelToken
from iterion.engine.errors import Cancelled, GraceSettingError, ToolLaunchError
from iterion.engine.outputcap import Captured, inline_cap, stream_file, take
from iterion.engine.procgroup import ChildrenLeft, child_grace_s, end_group, settle_group
from iterion.engine.tether import tethered

# script languages -> the interpreter that runs a script file
_INTERPRETERS: dict[str, list[str]] = {
    "sh": ["sh"],
    "bash": ["bash"],
    # docs/language.md §2: `py`/`python`/`python3` run with python3 (the one on PATH, where the author's
    # packages are; this process's interpreter only when there is none)
    "python": [shutil.which("python3") or sys.executable],
    "node": ["node"],
}
_SUFFIX = {"sh": ".sh", "bash": ".sh", "python": ".py", "node": ".js"}


@dataclass(frozen=True)
class ProcResult:
    stdout: str
    stderr: str
    exit_code: int
    # background children the shell left in its group when it exited (reported, by default killed)
    children_left: ChildrenLeft | None = None
    # the streams as captured: sizes, and where a stream over its inline share was kept
    out: Captured | None = None
    err: Captured | None = None

    def marks(self) -> dict[str, dict[str, object]]:
        """``{"stdout": {...}, "stderr": {...}}`` for the streams cut to their inline share."""
        return {name: c.mark() for name, c in (("stdout", self.out), ("stderr", self.err))
                if c is not None and c.truncated}


def script_argv(language: str, script_path: Path) -> list[str]:
    lang = (language or "sh").lower()
    if lang not in _INTERPRETERS:
        raise ToolLaunchError(f"unknown script language {language!r} (one of {', '.join(_INTERPRETERS)})")
    interp = _INTERPRETERS[lang]
    if shutil.which(interp[0]) is None and not os.path.isabs(interp[0]):
        raise ToolLaunchError(f"the {lang} interpreter ({interp[0]}) is not on PATH")
    return [*interp, str(script_path)]


def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], token: CancelToken,
                poll: float = 0.1, check: Callable[[], None] | None = None,
                keep_output: Path | None = None, what: str = "") -> ProcResult:
    """Run ``argv`` until it exits, or kill its process group and raise Cancelled on cancel.

    The call ends when ``argv[0]`` (the shell) exits, not when its output closes: stdout and
    stderr go to files, so a background child holding them open cannot hold the node. What the
    process wrote by the time it exited is its output, read back up to each stream's inline
    share (``outputcap``); with ``keep_output`` (a path prefix beside the run) a longer stream
    stays whole in ``<prefix>.stdout`` / ``.stderr``. Children still in the group then are
    settled by ``procgroup.settle_group`` (grace, then killed) and returned in ``children_left``.

    ``check`` is called while the process runs (e.g. the run's duration cap); whatever it raises
    kills the process group and propagates."""
    token.check()
    try:
        grace = child_grace_s()
    except GraceSettingError as exc:
        raise ToolLaunchError(f"{exc.message} ({exc.hint})") from None
    try:
        share = inline_cap() // 2
    except EnvSettingError as exc:
        raise ToolLaunchError(f"{exc.message} ({exc.hint})") from None
    with ExitStack() as files:
        try:
            (out_f, out_p), (err_f, err_p) = (stream_file(keep_output, s) for s in ("stdout", "stderr"))
            files.enter_context(out_f)
            files.enter_context(err_f)
        except OSError as exc:
            where = keep_output.parent if keep_output is not None else tempfile.gettempdir()
            raise ToolLaunchError(f"cannot create the files that capture the tool's output in "
                                  f"{where}: {exc.strerror or exc}") from None
        try:
            proc = subprocess.Popen(tethered(argv, path=env.get("PATH")), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out_f, stderr=err_f, start_new_session=True)
        except OSError as exc:
            raise ToolLaunchError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
        except ValueError as exc:  # a NUL byte or an unencodable character in argv or env
            raise ToolLaunchError(f"cannot start {argv[0]}: {exc}") from None

        def tick() -> None:
            if token.cancelled:
                raise Cancelled(token.reason or "cancelled")
            if check is not None:
                check()

        with token.process_group(proc.pid, what=what or argv[0]):
            try:
                while True:
                    try:
                        proc.wait(timeout=poll)
                        break
                    except subprocess.TimeoutExpired:
                        tick()
                out, err = take(out_f, out_p, share), take(err_f, err_p, share)
                left = settle_group(proc.pid, grace, tick=tick)
            except BaseException:
                proc.kill()  # the launcher: its PDEATHSIG ends the tool even before the group kill
                end_group(proc.pid, 0)  # and wait for the group to be gone: the stop comes after
                proc.wait()
                raise
    if token.cancelled:
        # finished in the same instant as the cancel: the cancel still wins (the run stops)
        raise Cancelled(token.reason or "cancelled")
    return ProcResult(out.text, err.text, proc.returncode, left, out, err)


# (argv, files outside the workspace it reads) -> the argv that runs it in the node's sandbox
Wrap = Callable[[list[str], tuple[Path, ...]], list[str]]


def run_command(command: str, *, cwd: Path, env: dict[str, str], token: CancelToken,
                check: Callable[[], None] | None = None, wrap: Wrap | None = None,
                keep_output: Path | None = None, what: str = "") -> ProcResult:
    # docs/language.md §2: "A command runs as `bash -c`" (bashisms such as [[ ]] or pipefail work); /bin/sh
    # only on a host without bash
    shell = shutil.which("bash") or "/bin/sh"
    argv = [shell, "-c", command]
    return run_process(wrap(argv, ()) if wrap else argv, cwd=cwd, env=env, token=token, check=check,
                       keep_output=keep_output, what=what)


def run_script(script: str, language: str, *, cwd: Path, env: dict[str, str], token: CancelToken,
               check: Callable[[], None] | None = None, wrap: Wrap | None = None,
               keep_output: Path | None = None, what: str = "") -> ProcResult:
    # The script file lives outside the workspace so it never shows up in a boundary.
    lang = (language or "sh").lower()
    fd, name = tempfile.mkstemp(prefix="iterion-tool-", suffix=_SUFFIX.get(lang, ""))
    try:
        # surrogateescape: a substituted value's undecodable bytes go back out as the same bytes
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(script)
        argv = script_argv(lang, Path(name))
        return run_process(wrap(argv, (Path(name),)) if wrap else argv, cwd=cwd, env=env, token=token, check=check,
                           keep_output=keep_output, what=what)
    finally:
        os.unlink(name)
