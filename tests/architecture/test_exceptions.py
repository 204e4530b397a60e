"""Every exception of the packages is either user-facing or translated before a person sees it.

The vocabulary lives in ``iterion/engine/errors.py``: its docstring draws the tree (which
internal error becomes which ``UserError`` or run status, and where) and ``TRANSLATED`` lists
every internal exception class of every package with the place it is caught. Each module of
the packages is imported and its exception classes collected: one that does not derive from
``gitrefs.persist.UserError`` and is not listed fails here, as does a listed one that no longer exists,
and an engine exception defined outside ``iterion.engine.errors``.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from iterion.engine import errors
from gitrefs.persist import UserError

LAYERS = ("gitrefs", "workspacetrack", "iterion", "cli")


def exception_classes() -> dict[str, type[BaseException]]:
    """Dotted name -> class, for each exception class defined in a module of the packages."""
    found: dict[str, type[BaseException]] = {}
    for layer in LAYERS:
        package = importlib.import_module(layer)
        names = [layer, *(m.name for m in pkgutil.walk_packages(package.__path__, f"{layer}."))]
        for name in names:
            module = importlib.import_module(name)
            for obj in vars(module).values():
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name:
                    found[f"{name}.{obj.__qualname__}"] = obj
    return found


def test_every_exception_is_a_user_error_or_listed_as_translated() -> None:
    classes = exception_classes()
    loose = sorted(n for n, c in classes.items() if not issubclass(c, UserError) and n not in errors.TRANSLATED)
    assert not loose, ("derive these from gitrefs.persist.UserError, or catch and translate them and list them in "
                       "iterion.engine.errors.TRANSLATED (with where):\n" + "\n".join(loose))
    stale = sorted(n for n in errors.TRANSLATED if n not in classes)
    assert not stale, f"TRANSLATED lists exceptions that no longer exist: {stale}"
    wrong = sorted(n for n in errors.TRANSLATED if issubclass(classes[n], UserError))
    assert not wrong, f"these are UserErrors already; TRANSLATED is for internal ones: {wrong}"


def test_the_engines_exceptions_live_in_one_module_and_its_tree_names_each() -> None:
    engine = {n: c for n, c in exception_classes().items() if n.startswith("iterion.engine.")}
    outside = sorted(n for n in engine if not n.startswith("iterion.engine.errors."))
    assert not outside, f"define the engine's exceptions in iterion/engine/errors.py: {outside}"
    doc = errors.__doc__ or ""
    undrawn = sorted(c.__name__ for c in engine.values() if f" {c.__name__} " not in doc)
    assert not undrawn, f"draw these in the tree of iterion/engine/errors.py's docstring: {undrawn}"
