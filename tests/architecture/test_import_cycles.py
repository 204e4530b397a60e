"""No import cycle among the packages' modules, not even one a function-level import hides.

A function-level import that closes a cycle (``a`` imports ``b`` at the top, ``b`` imports ``a``
inside a function "to break the cycle") keeps the cycle: the two modules still need each other,
one of them just fails later (on first use instead of at import) and the next engineer cannot
tell which module is below which. The fix is a move: what both need goes to a module below them
both. A function-level import that closes NO cycle is fine (the lazy imports that keep the CLI's
start-up light, an optional dependency).

The graph is read with ``ast`` from every module of the layers (nothing is executed). An edge is
every import that runs: top-level, inside a function (marked "function-level"), in a ``try``;
not one under ``if TYPE_CHECKING:`` (it never runs). ``from pkg import Name`` goes to the
module ``pkg.Name`` when there is one, to the home module of ``Name`` when ``pkg`` exports it
lazily (PEP 562: the homes its ``TYPE_CHECKING`` block names), else to ``pkg`` itself. A cycle
is a strongly connected group of two or more modules; each is reported with its edges.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from tests.architecture.sources import parsed

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("gitrefs", "workspacetrack", "iterion", "cli")

# Edges another helper's change removes (issue 31): allowed here until that change is merged,
# then its entry must go (one that no longer closes a cycle fails test_pending_edges_still_close_a_cycle).
PENDING: dict[tuple[str, str], str] = {
    # (none: an edge listed here is a known cycle awaiting its move; the test below keeps it honest)
}


@dataclass(frozen=True)
class Edge:
    source: str     # the importing module
    target: str     # the imported module
    line: int
    deferred: bool  # inside a function (or lambda): runs on first call, not at import

    def show(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line}{', function-level' if self.deferred else ''})"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).parts)
    parts[-1] = parts[-1].split(".", 1)[0]  # foo.py, foo.cpython-311-x86_64-linux-gnu.so
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules_of(root: Path, layers: Iterable[str] = LAYERS) -> dict[str, Path]:
    """Every module of ``layers`` under ``root``: Python files and built extensions (a leaf)."""
    found: dict[str, Path] = {}
    for layer in layers:
        for path in sorted((root / layer).rglob("*")):
            if path.suffix in (".py", ".so", ".pyd") and "__pycache__" not in path.parts:
                found.setdefault(module_name(path, root), path)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST, *, runtime: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Each import statement of ``tree`` with whether it is function-level; ``runtime``: skip the
    ``if TYPE_CHECKING:`` bodies, else yield only what they hold."""
    def walk(node: ast.AST, deferred: bool, typing_only: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk_one(stmt, deferred, True)
                for stmt in child.orelse:
                    yield from walk_one(stmt, deferred, typing_only)
                continue
            yield from walk_one(child, deferred, typing_only)

    def walk_one(child: ast.AST, deferred: bool, typing_only: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            if typing_only != runtime:
                yield child, deferred
            return
        inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from walk(child, inner, typing_only)

    yield from walk(tree, False, False)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def lazy_homes(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """For each package that exports names lazily (a module ``__getattr__``): name -> home module,
    read from the imports of its ``TYPE_CHECKING`` block (the homes it names for type checkers)."""
    homes: dict[str, dict[str, str]] = {}
    for module, path in modules.items():
        if path.name != "__init__.py":
            continue
        tree = parsed(path)
        if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body) and \
                "lazy_exports" not in path.read_text(encoding="utf-8"):
            continue
        names: dict[str, str] = {}
        for node, _ in _statements(tree, runtime=False):
            if isinstance(node, ast.ImportFrom):
                names.update((a.asname or a.name, _base(module, True, node)) for a in node.names)
        homes[module] = names
    return homes


def _known(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def edges_of(modules: dict[str, Path]) -> list[Edge]:
    homes = lazy_homes(modules)
    out: list[Edge] = []
    for module, path in modules.items():
        if path.suffix != ".py":
            continue
        tree = parsed(path)
        for node, deferred in _statements(tree, runtime=True):
            targets: list[str | None]
            if isinstance(node, ast.Import):
                targets = [_known(a.name, modules) for a in node.names]
            else:
                base = _base(module, path.name == "__init__.py", node)
                targets = []
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:
                        targets.append(sub)
                    elif alias.name in homes.get(base, {}):
                        targets.append(_known(homes[base][alias.name], modules))
                    else:
                        targets.append(_known(base, modules))
            out.extend(Edge(module, t, node.lineno, deferred) for t in targets if t and t != module)
    return out


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan, iterative), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def report(edges: list[Edge]) -> list[str]:
    """One paragraph per cycle: its modules and the edges between them."""
    out = []
    for group in cycles(edges):
        members = set(group)
        inside = sorted({(e.source, e.target): e for e in edges
                         if e.source in members and e.target in members}.values(),
                        key=lambda e: (e.source, e.target))
        out.append(f"cycle of {len(group)} modules: {', '.join(group)}\n"
                   + "\n".join(f"    {e.show()}" for e in inside))
    return out


def _graph() -> list[Edge]:
    modules = modules_of(REPO)
    assert len(modules) > 100, "no modules found: the cycle test would pass vacuously"
    return edges_of(modules)


def test_no_import_cycle_among_the_packages_modules() -> None:
    edges = [e for e in _graph() if (e.source, e.target) not in PENDING]
    found = report(edges)
    assert not found, ("import cycles (a function-level import does not open one: move what both "
                       "modules need below them both):\n" + "\n".join(found))


def test_pending_edges_still_close_a_cycle() -> None:
    """An allowance outliving its cycle would silently allow a new one through that edge: delete it."""
    edges = _graph()
    grouped = {m: i for i, group in enumerate(cycles(edges)) for m in group}
    present = {(e.source, e.target) for e in edges}
    stale = sorted(f"{a} -> {b}" for a, b in PENDING
                   if (a, b) not in present or a not in grouped or grouped.get(a) != grouped.get(b))
    assert not stale, "these PENDING edges close no cycle any more: delete them from PENDING:\n" + "\n".join(stale)


def _write(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return modules_of(root, ["pkg"])


def test_the_checker_sees_a_cycle_a_function_level_import_hides(tmp_path: Path) -> None:
    modules = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import helper\n",
        "pkg/b.py": "def helper() -> None:\n    from pkg import a  # 'breaks the cycle'\n",
        "pkg/c.py": "def later() -> None:\n    import json\n    from pkg.a import helper\n",  # lazy, no cycle
    })
    edges = edges_of(modules)
    (found,) = report(edges)
    assert "cycle of 2 modules: pkg.a, pkg.b" in found
    assert "pkg.b -> pkg.a (line 2, function-level)" in found and "pkg.c" not in found


def test_the_checker_follows_lazy_exports_and_skips_type_checking_imports(tmp_path: Path) -> None:
    modules = _write(tmp_path, {
        "pkg/__init__.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.store import Store\n"
                            "def __getattr__(name):\n    ...\n"),
        "pkg/store.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.user import x\n",
        "pkg/user.py": "def f() -> None:\n    from pkg import Store\n",
        "pkg/other.py": "from pkg.user import f\n",
        "pkg/back.py": "from pkg.other import x\ndef g() -> None:\n    from pkg import Store\n",
    })
    edges = edges_of(modules)
    assert Edge("pkg.user", "pkg.store", 2, True) in edges  # through the lazy export, to its home
    assert not any(e.source == "pkg.store" for e in edges)  # TYPE_CHECKING never runs
    assert report(edges) == []
    (_, store_path) = next((m, p) for m, p in modules.items() if m == "pkg.store")
    store_path.write_text("def h() -> None:\n    from pkg.user import f\n")
    (found,) = report(edges_of(modules))
    assert found.startswith("cycle of 2 modules: pkg.store, pkg.user")
