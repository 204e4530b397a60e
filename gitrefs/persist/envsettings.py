"""Numbers read from the environment (``ITERION_*_S`` timeouts, backoffs, graces): the one reader.

Every setting of this kind reads through :func:`env_seconds` (or :func:`env_number` for a plain
factor), so they all take the same values and refuse the same garbage the same way:

- unset, empty or blank: the caller's default (``FOO= iterion ...`` means "not set");
- a plain decimal number (``120``, ``2.5``, ``1e3``) within the setting's range: that number;
- anything else (``abc``, ``10s``, ``nan``, ``inf``, ``1e999``, a negative number, ``0`` where
  zero makes no sense, more than :data:`MAX_SECONDS`): :class:`EnvSettingError`, one line naming
  the variable and the value as given (``repr``), and a hint with a value that works.

Units are not accepted: these variables are named for seconds (``_S``) or documented so, and a
silent reading of ``10m`` as anything would be a guess. Callers read at *use* time, never at
import time: importing a module must not fail because of the environment.

This module sits in ``gitrefs.persist`` (the lowest layer) because ``gitrefs`` reads one too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from gitrefs.persist.errors import UserError

# Past this a timeout is "forever" anyway, and larger values overflow threading/select timeouts
# (threading.TIMEOUT_MAX is ~9.2e9 s on Linux): refused rather than crashing at use.
MAX_SECONDS = 1e9


class EnvSettingError(UserError):
    """An environment variable holds a value its setting refuses (exit 2: bad input).

    ``name`` is the variable, ``raw`` the value as given, ``expected`` what would be accepted
    ("a number of seconds > 0"), ``example`` the value the hint suggests."""

    def __init__(self, name: str, raw: str, expected: str, example: str) -> None:
        super().__init__(f"${name}={raw!r} is not {expected}", hint=f"unset it or set {name}={example}")
        self.name, self.raw, self.expected, self.example = name, raw, expected, example


def _number(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        return math.nan


def env_number(name: str, default: float, *, zero_ok: bool = True, maximum: float = MAX_SECONDS,
               what: str = "a number", example: str | None = None,
               alternative: str | None = None, environ: Mapping[str, str] | None = None) -> float:
    """``$name`` as a finite number in ``[0, maximum]`` (``(0, maximum]`` without ``zero_ok``),
    or ``default`` when unset or blank; raises EnvSettingError on anything else.

    ``what`` names the quantity in the refusal ("a number of seconds"), ``alternative`` a word
    the caller accepts besides numbers (``'keep'``); ``example`` is the value the hint shows
    (default: ``default``)."""
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return default
    value = _number(raw.strip())
    if math.isfinite(value) and (value > 0 or (zero_ok and value == 0)) and value <= maximum:
        return value + 0.0  # -0 reads as 0
    expected = f"{what} {'>= 0' if zero_ok else '> 0'}"
    if math.isfinite(value) and value > maximum:
        expected += f" and at most {maximum:.0f}" if maximum.is_integer() else f" and at most {maximum:g}"
    if alternative:
        expected += f" or {alternative}"
    raise EnvSettingError(name, raw, expected, example if example is not None else f"{default:g}")


def env_seconds(name: str, default: float, *, zero_ok: bool = True, example: str | None = None,
                alternative: str | None = None, environ: Mapping[str, str] | None = None) -> float:
    """``$name`` as a number of seconds (see :func:`env_number`); ``default`` when unset/blank."""
    return env_number(name, default, zero_ok=zero_ok, what="a number of seconds", example=example,
                      alternative=alternative, environ=environ)
