"""The one duration grammar: ``90s``, ``30m``, ``4h``, ``1h30m``, ``1.5h``, ``250ms``, ``2d``, ``1w``.

A duration is one or more parts ``NUMBER UNIT`` written together (no spaces, no sign, no
exponent), NUMBER being ``12``, ``1.5``, ``1.`` or ``.5``, UNIT one of ns, us/µs, ms, s, m, h, d, w
(lower case; ``m`` is minutes). Go's ``time.ParseDuration`` forms read the same here, plus days
and weeks. It must be finite and not negative.

Callers differ only where they mean to (each says why where it calls):

- a run's time cap (``--max-duration``, the HTTP API's ``max_duration``, ``iterion.budget``):
  a bare number is seconds (``45``), errors are ``DurationError``;
- the DSL's ``max_duration: "..."`` string (``iterion.dsl.values``): a unit is required, as in
  the original (a bare number is written as a number literal there); unreadable -> None, a
  warning and no limit (docs/language.md §2, workflow);
- ``iterion gc --older-than`` (``iterion.store.gc``): a unit is required (is ``7`` days or
  seconds? a deletion must not guess), any case and a space before the unit are tolerated.

Light on purpose (``re`` only): the CLI's flag parsing and the DSL compiler import it.
"""

from __future__ import annotations

import math
import re

UNITS: dict[str, float] = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
                           "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w)")
EXAMPLES = "30m, 4h, 90s or 1h30m"


class DurationError(ValueError):
    pass


def parse_duration(text: str | int | float, *, bare_seconds: bool = True) -> float:
    """Seconds in ``text`` (see the module's grammar); a number (or, with ``bare_seconds``, a
    bare number in text) is seconds. Raises DurationError with a one-line message."""
    if isinstance(text, bool):
        raise DurationError(f"duration {text!r} is not a duration")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = text.strip()
        if not s:
            raise DurationError(f"duration is empty; write e.g. {EXAMPLES}")
        try:
            if not bare_seconds:
                raise ValueError(s)
            value = float(s)
        except ValueError:
            pos, value = 0, 0.0
            for m in _PART.finditer(s):
                if m.start() != pos:
                    break
                value += float(m.group(1)) * UNITS[m.group(2)]
                pos = m.end()
            if pos != len(s) or pos == 0:
                raise DurationError(f"duration {text!r} is not understood; write e.g. {EXAMPLES}") from None
    if value < 0 or not math.isfinite(value):
        raise DurationError(f"duration {text!r} must be a finite non-negative time")
    return value


def format_duration(seconds: float) -> str:
    """Inverse of parse_duration for display: 5400 -> "1h30m", 90 -> "1m30s"."""
    whole = int(seconds)
    frac = seconds - whole
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "")
    if s or frac or not out:
        out += f"{s + frac:g}s"
    return out
