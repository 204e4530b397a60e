"""Load-time checks of ``subbot`` nodes (docs/language.md 2.14): the child workflow exists, is
valid, and its vars match the node's ``with:`` map.

The child is compiled on its own (its files are not part of the parent's unit, so editing a
child never changes the parent's digest: ``rewind --auto`` does not see it; target the subbot
node with ``--node``). A child that names its parent, even indirectly, is refused (C117).
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from iterion.dsl.diagnostics import Severity, Sink
from iterion.dsl.unit import CompileResult
from iterion.ir import NodeKind, Workflow

# the child files being checked on this stack: a cycle stops here instead of recursing forever
_CHECKING: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("subbot_checking", default=())


def child_path(main_file: str | os.PathLike[str], source_path: str) -> Path:
    """The child workflow of a subbot node whose ``source_path`` is relative to the main file's directory."""
    return Path(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(main_file)), source_path)))


def check_subbots(wf: Workflow, main_file: Path, env: Mapping[str, str], sink: Sink,
                  check_inside: Callable[[Path, str], None], load: Callable[..., CompileResult]) -> None:
    """``load`` is the loader's ``load_workflow`` (passed in: the loader imports this module)."""
    for node in wf.nodes.values():
        if node.kind is not NodeKind.SUBBOT or node.source_path is None or node.source is None:
            continue
        owner = f"subbot '{node.id}'"
        path = child_path(main_file, node.source_path)
        try:
            check_inside(path, node.source)
        except PermissionError as exc:
            sink.add("L005", node.span, f"{owner}: source refused: {exc}",
                     "a child workflow lives inside the project, like an import")
            continue
        if not path.exists():
            sink.add("C117", node.span, f"{owner}: source {node.source} not found ({path})",
                     "source paths are relative to the file that declares the node")
            continue
        key = str(path.resolve())
        stack = _CHECKING.get()
        if key in stack or str(main_file.resolve()) == key:
            sink.add("C117", node.span, f"{owner}: source {node.source} runs its own parent (a cycle)",
                     "a child workflow cannot launch its parent, even indirectly")
            continue
        token = _CHECKING.set((*stack, str(main_file.resolve()), key))
        try:
            child = load(path, env=env)
        finally:
            _CHECKING.reset(token)
        if child.workflow is None:
            first = next((d for d in child.diagnostics if d.severity is Severity.ERROR), None)
            sink.add("C117", node.span, f"{owner}: child workflow {node.source} does not compile"
                     + (f": line {first.span.line}: {first.code} {first.message}" if first else ""), f"run: iterion validate {node.source}")
            continue
        given = {k for k, _ in node.subbot_with}
        for key_name in sorted(given - set(child.workflow.vars)):
            sink.add("C118", node.span, f"{owner}: with.{key_name} is not a var of {node.source}",
                     "its vars: " + (", ".join(sorted(child.workflow.vars)) or "none declared"))
        missing = sorted(n for n, v in child.workflow.vars.items() if not v.has_default and n not in given)
        for name in missing:
            sink.add("C118", node.span, f"{owner}: {node.source} needs var {name}, which with: does not pass",
                     f'add with: {{ {name}: "..." }}')
