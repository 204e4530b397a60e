"""The layer rule: ``gitrefs.persist`` < ``gitrefs`` < ``workspacetrack`` < ``iterion`` < ``cli``.

A module may import its own layer and the layers below it, never one above: a lower layer that
reached up would pull the engine (or the CLI) into tools that must work without them, and make
the import graph a cycle waiting to happen. Every ``import`` statement counts - top-level,
inside a function (the deferred imports that keep start-up light), under ``TYPE_CHECKING`` -
because each one is a dependency the next engineer has to reason about. Imports are read with
``ast`` (nothing is executed), relative imports are resolved against the module's package.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("gitrefs.persist", "gitrefs", "workspacetrack", "iterion", "cli")
RANK = {name: i for i, name in enumerate(LAYERS)}
# the entry-point shims: ``python -m iterion`` runs the CLI, so ``iterion.__main__`` (and nothing
# else in ``iterion/``) may import ``cli.main``, the one name it needs, and nothing more
ENTRY_SHIMS = {"iterion.__main__": {"cli.main"}}


@dataclass(frozen=True)
class ImportSite:
    module: str      # the importing module, dotted
    line: int
    target: str      # the imported module, dotted (absolute)


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(path: Path, module: str | None = None) -> list[ImportSite]:
    """Every import statement of ``path`` (the module ``module``, by default named from its
    place in the repository), wherever it sits in the file."""
    module = module or module_name(path)
    tree = parsed(path)
    out: list[ImportSite] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(ImportSite(module, node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append(ImportSite(module, node.lineno, _resolve(module, path.name == "__init__.py", node)))
    return out


def layer_of(module: str) -> str:
    """The layer ``module`` belongs to: the longest layer name it is, or lies under."""
    return max((la for la in LAYERS if module == la or module.startswith(la + ".")), key=len,
               default=module.split(".")[0])


def layer_files() -> list[Path]:
    files = sorted({p for layer in LAYERS for p in (REPO / layer.replace(".", "/")).rglob("*.py")})
    assert files, "no source files found: the layer test would pass vacuously"
    return files


def _shown(path: Path) -> Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def violations(files: list[Path], *, as_module: str | None = None) -> list[str]:
    found: list[str] = []
    for path in files:
        for site in imports_of(path, as_module):
            own, target = layer_of(site.module), layer_of(site.target)
            if site.target in ENTRY_SHIMS.get(site.module, ()):
                continue
            if target in RANK and RANK[target] > RANK[own]:
                found.append(f"{_shown(path)}:{site.line}: {site.module} ({own}) imports "
                             f"{site.target} ({target}), a higher layer")
    return found


def test_no_lower_layer_imports_a_higher_one() -> None:
    bad = violations(layer_files())
    assert not bad, ("lower layers never import higher ones (gitrefs.persist < gitrefs < workspacetrack < iterion < cli):\n"
                     + "\n".join(bad))


def test_every_layer_package_is_checked() -> None:
    """Each layer is a package on disk: a renamed one must not silently drop out of the rule."""
    for layer in LAYERS:
        assert (REPO / layer.replace(".", "/") / "__init__.py").is_file(), f"layer {layer} has no package at {REPO / layer}"


@pytest.mark.parametrize("source, expected", [
    # a function-local import counts as much as a top-level one
    ("def f() -> None:\n    from iterion.store import Store\n", "iterion.store"),
    # so does one under TYPE_CHECKING
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cli.output\n", "cli.output"),
])
def test_the_checker_sees_hidden_imports(tmp_path: Path, source: str, expected: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    bad = violations([probe], as_module="gitrefs.probe")
    assert len(bad) == 1 and expected in bad[0] and "higher layer" in bad[0]


def test_relative_imports_resolve_to_their_package() -> None:
    node = ast.parse("from ..store import Store").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("iterion.engine.runner", False, node) == "iterion.store"
    assert _resolve("iterion.engine", True, node) == "iterion.store"


def test_the_entry_shim_only_hands_over_to_the_cli() -> None:
    """``iterion/__main__.py`` is the one allowed upward import: it must stay a shim (its only
    import is ``cli.main``), so the exception cannot grow into a real dependency on the CLI."""
    path = REPO / "iterion" / "__main__.py"
    assert [s.target for s in imports_of(path)] == ["cli.main"]
    # and the exception is for that module alone: the same import anywhere else still counts
    assert violations([path], as_module="iterion.engine.probe")


def test_the_bottom_layer_inside_gitrefs_may_not_import_the_rest_of_gitrefs(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from gitrefs.ids import check_id\nfrom gitrefs.persist import atomic\n")
    bad = violations([probe], as_module="gitrefs.persist.probe")
    assert len(bad) == 1 and "gitrefs.ids" in bad[0]
    assert not violations([probe], as_module="gitrefs.probe")  # gitrefs itself may import both
