"""The C extension (workspacetrack/_fastwalk.c), when it is built and current: the one loader.

``FAST`` is the module, or None when it was not built (no C compiler at install time), is a
build of an older source (an editable install keeps its old build after a pull until
``pip install -e .`` runs again), or ``ITERION_PURE=1`` opts out of it: the walk and the index
reader then use their Python twins, slower but the same. ``API`` must equal the number the C
source sets.

The slow path is visible: ``note_slow_path()`` (called by every capture) logs one warning per
process saying why and how to fix it, unless the user chose it (``ITERION_PURE=1``) or silenced
it (``ITERION_QUIET=1``). It goes through ``logging`` (Python's last-resort handler prints it on
stderr when nothing is configured), since the layers below the CLI never write to a stream.
``iterion doctor`` reports the same status (``status()``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import ModuleType

API = 8
PURE_ENV = "ITERION_PURE"
QUIET_ENV = "ITERION_QUIET"
REBUILD_HINT = ("reinstall with a C compiler present (Debian/Ubuntu: apt-get install gcc python3-dev, then "
                "pip install --force-reinstall iterion, or pip install -e . in a checkout)")

log = logging.getLogger("iterion.fastpath")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def status() -> tuple[str, str]:
    """``(kind, detail)``: kind is ``built``, ``pure`` (opted out), ``missing`` or ``stale``."""
    if _truthy(PURE_ENV):
        return "pure", f"{PURE_ENV}=1: the pure-Python walk is used by choice"
    try:
        from workspacetrack import _fastwalk
    except ImportError as exc:
        return "missing", f"workspacetrack._fastwalk is not built ({exc})"
    have = getattr(_fastwalk, "API", None)
    if have != API:
        return "stale", f"workspacetrack._fastwalk is an old build (API {have}, the source needs {API})"
    so, src = Path(_fastwalk.__file__ or ""), Path(__file__).with_name("_fastwalk.c")
    if so.is_file() and src.is_file() and src.stat().st_mtime > so.stat().st_mtime + 1:
        return "stale", f"{so.name} is older than _fastwalk.c (rebuild: pip install -e .)"
    return "built", f"{so.name}"


def _load() -> ModuleType | None:
    if _truthy(PURE_ENV):
        return None
    try:
        from workspacetrack import _fastwalk
    except ImportError:  # pragma: no cover - built on every supported install, optional by design
        return None
    return _fastwalk if getattr(_fastwalk, "API", None) == API else None


FAST: ModuleType | None = _load()
_noted = False


def note_slow_path() -> None:
    """Say once per process that captures run on the slow path, and why (see the module doc)."""
    global _noted
    if FAST is not None or _noted:
        return
    _noted = True
    if _truthy(PURE_ENV) or _truthy(QUIET_ENV):
        return
    _kind, why = status()
    log.warning("iterion: captures use the slow pure-Python walk: %s; fix: %s (or set %s=1 to use it "
                "quietly; `iterion doctor` shows the status)", why, REBUILD_HINT, PURE_ENV)
