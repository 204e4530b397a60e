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
====  =================================================================================

Lower layers raise ``persist.UserError`` with exit code 1 for "refused operation" and 2 for
"bad input"; at the CLI both are refusals and exit 2 (``cli.errors.report``): 1 is reserved
for a run that failed.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_INTERNAL = 3
EXIT_PAUSED_HUMAN = 4
EXIT_FAILED_RESUMABLE = 5
EXIT_CANCELLED = 6
EXIT_CONTROL_PENDING = 7
EXIT_PAUSED_OPERATOR = 8

# keyed by status value (RunStatus is a StrEnum, so its members look up here): importing the
# store to name them would slow every command's start-up
STATUS_EXIT: dict[str, int] = {
    "finished": EXIT_OK,
    "failed": EXIT_FAILED,
    "paused_waiting_human": EXIT_PAUSED_HUMAN,
    "paused_operator": EXIT_PAUSED_OPERATOR,
    "failed_resumable": EXIT_FAILED_RESUMABLE,
    "cancelled": EXIT_CANCELLED,
}

EXIT_HELP = ("Exit status: 0 finished, 1 failed, 2 refused (bad input, invalid workflow, refusal), "
             "3 internal error, 4 waiting for answers, 5 failed_resumable, 6 cancelled, 8 paused_operator.")


def cli_exit_code(user_error_code: int) -> int:
    """The CLI's exit code for a lower layer's ``UserError.exit_code`` (1 "refused" -> 2)."""
    return EXIT_REFUSED if user_error_code == 1 else user_error_code
