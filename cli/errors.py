"""How the CLI turns failures into one clear line and an exit code (never a traceback)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from cli.exit_codes import ExitCode, exit_for_kind
from cli.output import echo_err
from gitrefs.persist import UserError
from gitrefs.persist.errors import ErrorKind
from gitrefs.persist.oserror import environment_error
from gitrefs.persist.text import one_line

# The exit-code table lives in cli/exit_codes.py. A problem the command found (an invalid
# workflow, a refused operation) is a refusal: ExitCode.REFUSED like bad input; 1 means a run failed.


class CliError(UserError):
    """A user-facing failure raised by the CLI itself: ``message`` one line, ``hint`` a second,
    ``exit_status`` the exit status the command chose (``exit_code=``: an ExitCode, never a kind)."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = ExitCode.REFUSED) -> None:
        status = ExitCode(exit_code)
        # its kind, for a caller below the CLI that reads one: only an internal error is not a refusal
        super().__init__(message, hint=hint,
                         kind=ErrorKind.INTERNAL if status is ExitCode.INTERNAL else ErrorKind.BAD_INPUT)
        self.exit_status = status


def fail(message: str, *, hint: str | None = None, exit_code: int = ExitCode.REFUSED) -> NoReturn:
    raise CliError(message, hint=hint, exit_code=exit_code)


# a command named in a lower layer's message or hint: "`iterion resume ...`" or a hint that is
# a command ("iterion resume --run-id R ..."); printed with the program as invoked
_OUR_COMMAND = re.compile(r"(^|`)iterion (?=[a-z])")


def spelled(text: str) -> str:
    """``text`` with each command it names spelled as this program was invoked
    (iterion.invocation: ``.venv/bin/iterion resume ...`` when invoked so), to paste as is."""
    if "iterion " not in text:
        return text
    from iterion.invocation import program

    prog = program()
    return _OUR_COMMAND.sub(lambda m: f"{m.group(1)}{prog} ", text)


def report(exc: BaseException) -> int:
    """Print ``exc`` for a person and return the exit code to use."""
    # Every layer derives its user-facing errors from gitrefs.persist.UserError: bad input or a
    # refusal, never a bug, so one line and a hint instead of a traceback.
    exc = environment_error(exc) or exc  # a full/read-only disk, a permission: one line, exit 2
    if isinstance(exc, UserError):
        echo_err(f"error: {one_line(spelled(str(exc.message or exc)))}")
        if exc.hint:
            echo_err(f"hint: {one_line(spelled(exc.hint))}")
        return exc.exit_status if isinstance(exc, CliError) else exit_for_kind(exc.kind)
    echo_err(f"internal error: {type(exc).__name__}: {exc}")
    echo_err("hint: re-run with ITERION_DEBUG=1 for the traceback, and report it")
    return ExitCode.INTERNAL


def run_guarded(entry: Callable[[], object]) -> NoReturn:
    try:
        entry()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        echo_err("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except BaseException as exc:  # noqa: BLE001 - the one place that turns errors into exit codes
        if os.environ.get("ITERION_DEBUG"):
            raise
        sys.exit(report(exc))
    sys.exit(ExitCode.OK)
