"""Package names imported on first use (PEP 562): the one implementation of a package's lazy
``__getattr__``/``__dir__``, so that importing a light name of a package does not import every
module behind its other names (CLI start-up, issue 14 point 10).

Imports nothing but ``importlib``: ``gitrefs.persist``'s own ``__init__`` uses it too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(``__getattr__``, ``__dir__``) for ``package``: a name of ``homes`` (name -> module) is
    imported from its module on first access and kept in ``namespace`` (the package's globals),
    so later accesses are plain lookups; any other name is an AttributeError (which is also what
    lets ``from package import submodule`` import the submodule)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
