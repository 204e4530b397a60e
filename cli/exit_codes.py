"""The one table of the CLI's exit codes (README "Exit codes" shows the same table).

Every code means one thing, so a script can branch on it:

====  =================================================================================
0     success; `run`/`resume`: the run finished
1     `run`/`resume`: the run failed (not resumable)
2     refused: bad input or usage, an invalid workflow, a refused operation (a finished
      run, a changed source without --force, missing answers), a damaged store (checkpoint
      missing, corrupt run.json), an ambiguous run reference, environment trouble (a
      read-only store or workspace, a busy workspace under --no-wait)
3     internal error (a bug: re-run with ITERION_DEBUG=1 for the traceback)
4     `run`/`resume`: paused_waiting_human (answers needed)
5     `run`/`resume`: failed_resumable (a full disk mid-run too: STORAGE_UNWRITABLE)
6     `run`/`resume`: cancelled
7     `cancel`/`pause`: requested, takes effect at the run's next node boundary
8     `run`/`resume`: paused_operator (resume it, no answers needed)
130   interrupted (Ctrl-C) outside a run (inside one, Ctrl-C cancels it: 6)
====  =================================================================================

``ExitCode`` is the one home of these numbers: every command exits with one of its members,
never a literal (tests/architecture/test_exit_codes.py greps for literals). Lower layers never
choose an exit status: they raise ``gitrefs.persist.UserError`` with a kind
(``gitrefs.persist.errors.ErrorKind``), and ``EXIT_FOR_KIND`` here is the one place a kind
becomes an exit status (``cli.errors.report``): a refusal and bad input both exit 2, since 1 is
reserved for a run that failed. The CLI's own ``cli.errors.CliError`` carries the status the
command chose (an ExitCode, never a kind).
"""

from __future__ import annotations

from enum import IntEnum

from gitrefs.persist.errors import ErrorKind


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    REFUSED = 2
    INTERNAL = 3
    PAUSED_HUMAN = 4
    FAILED_RESUMABLE = 5
    CANCELLED = 6
    CONTROL_PENDING = 7
    PAUSED_OPERATOR = 8
    INTERRUPTED = 130


# keyed by status value (RunStatus is a StrEnum, so its members look up here): importing the
# store to name them would slow every command's start-up
STATUS_EXIT: dict[str, ExitCode] = {
    "finished": ExitCode.OK,
    "failed": ExitCode.FAILED,
    "paused_waiting_human": ExitCode.PAUSED_HUMAN,
    "paused_operator": ExitCode.PAUSED_OPERATOR,
    "failed_resumable": ExitCode.FAILED_RESUMABLE,
    "cancelled": ExitCode.CANCELLED,
}

EXIT_HELP = ("Exit status: 0 finished, 1 failed, 2 refused (bad input, invalid workflow, refusal), "
             "3 internal error, 4 waiting for answers, 5 failed_resumable, 6 cancelled, 8 paused_operator.")


# the CLI's exit status for each kind of a lower layer's failure: the one mapping (tested by
# tests/cli/test_exit_kinds.py; the README's table shows the result)
EXIT_FOR_KIND: dict[ErrorKind, ExitCode] = {
    ErrorKind.REFUSED: ExitCode.REFUSED,    # not ExitCode.FAILED: 1 means a run failed
    ErrorKind.BAD_INPUT: ExitCode.REFUSED,
    ErrorKind.INTERNAL: ExitCode.INTERNAL,
}


def exit_for_kind(kind: int | None) -> ExitCode:
    """The exit status for a kind, also as a server sends it (``exit_code`` of an HTTP error body,
    ``iterion remote``); a missing or unknown value is a refusal."""
    try:
        return EXIT_FOR_KIND[ErrorKind(kind)] if kind is not None else ExitCode.REFUSED
    except ValueError:
        return ExitCode.REFUSED
