"""Each package's public surface is pinned, so changing it is a deliberate act.

The surface of a package is its ``__all__`` when it declares one, else the public names its
``__init__.py`` binds (imports, functions, classes, assignments not starting with ``_``). Both
are read from the source with ``ast``. ``public_surface.json`` beside this file records them;
a package whose surface differs fails here with the difference spelled out. When the change is
meant, update the JSON in the same commit (``python tests/architecture/test_public_surface.py``
rewrites it from the tree), so a reviewer sees the API change as a diff of names.
"""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("gitrefs", "workspacetrack", "iterion", "cli")
PINNED = Path(__file__).with_name("public_surface.json")


def packages() -> dict[str, Path]:
    """Dotted package name -> its ``__init__.py``, for every package of every layer."""
    out: dict[str, Path] = {}
    for layer in LAYERS:
        for init in sorted((REPO / layer).rglob("__init__.py")):
            out[".".join(init.parent.relative_to(REPO).parts)] = init
    return out


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                value = ast.literal_eval(node.value)
                return sorted(value)
    return None


def _bound_names(tree: ast.Module) -> list[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return sorted(n for n in names if not n.startswith("_"))


def surface(init: Path) -> dict[str, object]:
    tree = ast.parse(init.read_bytes(), filename=str(init))
    declared = _declared_all(tree)
    if declared is not None:
        return {"kind": "__all__", "names": declared}
    return {"kind": "bound", "names": _bound_names(tree)}


def current() -> dict[str, dict[str, object]]:
    return {name: surface(init) for name, init in packages().items()}


def test_public_surfaces_are_the_pinned_ones() -> None:
    pinned = json.loads(PINNED.read_text())
    now = current()
    problems: list[str] = []
    for pkg in sorted(set(pinned) | set(now)):
        if pkg not in now:
            problems.append(f"{pkg}: pinned but no longer a package")
            continue
        if pkg not in pinned:
            problems.append(f"{pkg}: a new package; pin its surface {now[pkg]['names']}")
            continue
        old, new = pinned[pkg], now[pkg]
        if old["kind"] != new["kind"]:
            problems.append(f"{pkg}: surface was given by {old['kind']}, now by {new['kind']}")
        added = sorted(set(new["names"]) - set(old["names"]))
        removed = sorted(set(old["names"]) - set(new["names"]))
        if added or removed:
            problems.append(f"{pkg}: added {added or 'nothing'}, removed {removed or 'nothing'}")
    assert not problems, ("a package's public surface changed; if that is meant, update "
                          f"{PINNED.relative_to(REPO)} in the same commit "
                          "(python tests/architecture/test_public_surface.py rewrites it):\n"
                          + "\n".join(problems))


@pytest.mark.parametrize("pkg", sorted(n for n, s in current().items() if s["kind"] == "__all__"))
def test_every_exported_name_exists(pkg: str) -> None:
    """``__all__`` promises names: each must be importable from the package."""
    module = importlib.import_module(pkg)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{pkg}.__all__ names what the package does not define: {missing}"


def test_the_reader_sees_both_kinds(tmp_path: Path) -> None:
    declared = tmp_path / "a.py"
    declared.write_text("from x import y, z\n__all__ = ['z', 'y']\n")
    assert surface(declared) == {"kind": "__all__", "names": ["y", "z"]}
    bound = tmp_path / "b.py"
    bound.write_text("from __future__ import annotations\nimport os.path\nfrom m import a as b\n"
                     "_hidden = 1\nVERSION = '1'\ndef f() -> None: ...\nclass C: ...\n")
    assert surface(bound) == {"kind": "bound", "names": ["C", "VERSION", "b", "f", "os"]}


if __name__ == "__main__":  # rewrite the pinned surfaces from the tree (a deliberate API change)
    PINNED.write_text(json.dumps(current(), indent=2, sort_keys=True) + "\n")
    sys.stdout.write(f"wrote {PINNED}\n")
