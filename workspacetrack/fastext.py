"""The C extension (workspacetrack/_fastwalk.c), when it is built and current: the one loader.

``FAST`` is the module, or None when it was not built (no C compiler at install time) or is a
build of an older source (an editable install keeps its old build after a pull until
``pip install -e .`` runs again): the walk and the index reader then use their Python twins,
slower but the same. ``API`` must equal the number the C source sets.
"""

from __future__ import annotations

from types import ModuleType

API = 7


def _load() -> ModuleType | None:
    try:
        from workspacetrack import _fastwalk
    except ImportError:  # pragma: no cover - built on every supported install, optional by design
        return None
    return _fastwalk if getattr(_fastwalk, "API", None) == API else None


FAST: ModuleType | None = _load()
