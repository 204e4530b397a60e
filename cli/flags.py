"""Checks of numeric command-line flags that typer's own parsing lets through."""

from __future__ import annotations

import math

from pydantic import ValidationError

from cli.errors import CliError


def finite_flag(value: float | None, flag: str) -> None:
    """Refuse ``nan``, ``inf`` and overflowing values such as ``1e999`` (typer parses them as floats)."""
    if value is not None and not math.isfinite(value):
        raise CliError(f"{flag} {value} is not a finite number", hint=f"give a number, e.g. {flag} 10")


def one_line(exc: Exception) -> str:
    """The reason of a validation error on one line (pydantic's own text spans several)."""
    if isinstance(exc, ValidationError) and exc.errors():
        return str(exc.errors()[0].get("msg", exc)).removeprefix("Value error, ")
    return " ".join(str(exc).split())
