"""How the CLI turns failures into one clear line and an exit code (never a traceback)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

# Exit codes: 1 = the command ran and found a problem (validation errors, refused operation),
# 2 = bad input (usage, unknown run, invalid id, not a repository), 3 = internal error.
EXIT_PROBLEM = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class CliError(Exception):
    """A user-facing failure: ``message`` is printed as one line, ``hint`` on a second."""

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code


# Exception types from lower layers that are the user's input problem, not a bug. Each layer
# registers its base error here (see register_user_error) so the CLI never prints a traceback
# for them.
_USER_ERRORS: list[type[BaseException]] = [CliError]


def register_user_error(exc_type: type[BaseException]) -> None:
    if exc_type not in _USER_ERRORS:
        _USER_ERRORS.append(exc_type)


def fail(message: str, *, hint: str | None = None, exit_code: int = EXIT_BAD_INPUT) -> NoReturn:
    raise CliError(message, hint=hint, exit_code=exit_code)


def report(exc: BaseException) -> int:
    """Print ``exc`` for a person and return the exit code to use."""
    if isinstance(exc, tuple(_USER_ERRORS)):
        msg = getattr(exc, "message", None) or str(exc)
        typer.echo(f"error: {msg}", err=True)
        hint = getattr(exc, "hint", None)
        if hint:
            typer.echo(f"hint: {hint}", err=True)
        return int(getattr(exc, "exit_code", EXIT_BAD_INPUT))
    typer.echo(f"internal error: {type(exc).__name__}: {exc}", err=True)
    typer.echo("hint: re-run with ITERION_DEBUG=1 for the traceback, and report it", err=True)
    return EXIT_INTERNAL


F = TypeVar("F", bound=Callable[..., object])


def run_guarded(entry: Callable[[], object]) -> NoReturn:
    try:
        entry()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except BaseException as exc:  # noqa: BLE001 - the one place that turns errors into exit codes
        if os.environ.get("ITERION_DEBUG"):
            raise
        sys.exit(report(exc))
    sys.exit(0)
