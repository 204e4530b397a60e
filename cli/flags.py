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


def key_values(items: list[str], what: str, example: str = "name=value") -> dict[str, str]:
    """Repeated ``KEY=VALUE`` flags (``--var``, ``--answer``, ``--attach``) as a dict.

    A key given twice with different values is refused: which one wins would be a guess (an
    ``--answer approved=true ... --answer approved=false`` typed in a hurry must not publish).
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"{what} {item!r} is not KEY=VALUE", hint=f"e.g. {what} {example}")
        if not key:
            raise CliError(f"{what} {item!r} has an empty key", hint=f"e.g. {what} {example}")
        if key in out and out[key] != value:
            raise CliError(f"{what} {key} is given twice, as {out[key]!r} and {value!r}",
                           hint=f"give {what} {key}=... once")
        out[key] = value
    return out
