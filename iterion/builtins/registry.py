"""The registry of built-in tools: one home for their names (the compiler reads ``NAMES`` to
refuse an unknown one-word command) and for calling one (the engine's tool node).

A built-in is called in-process with the node input as a JSON object and returns a JSON object.
Its modules are imported only when it is called: validating a workflow stays light.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# name -> module holding ``call_<name>(ctx, args)``
_HOMES: dict[str, str] = {
    "read_file": "iterion.builtins.workspace",
    "write_file": "iterion.builtins.workspace",
    "list_dir": "iterion.builtins.workspace",
    "grep": "iterion.builtins.workspace",
    "glob": "iterion.builtins.workspace",
    "privacy_filter": "iterion.builtins.privacy_tools",
    "privacy_unfilter": "iterion.builtins.privacy_tools",
}
NAMES: tuple[str, ...] = tuple(sorted(_HOMES))

# docs/language.md, "Built-in tools": none of these may appear in a command naming a built-in
_SHELL_CHARS = re.compile(r"""[ \t|&;><$`(){}"'/]""")


class BuiltinError(Exception):
    """The built-in refused or failed; the message is the node's failure, for a person to read."""


@dataclass
class BuiltinContext:
    """What a built-in may use of the run: its workspace (and what is protected in it), its run
    directory (the PII vault lives there), and the cancel check."""

    workspace: Path
    run_dir: Path
    run_id: str
    protected_dirs: tuple[Path, ...] = ()
    check: Callable[[], None] = field(default=lambda: None)


def one_word(command: str) -> str | None:
    """The word a command names a built-in by (docs/language.md, "Built-in tools": one word, no template, none of the
    shell characters), else None."""
    word = command.strip()
    if not word or "{{" in word or _SHELL_CHARS.search(word) or "\n" in word:
        return None
    return word


def is_builtin(name: str) -> bool:
    return name in _HOMES


def call(name: str, ctx: BuiltinContext, args: dict[str, Any]) -> dict[str, Any]:
    """Run built-in ``name`` on ``args``; raises BuiltinError (KeyError for an unknown name)."""
    module = importlib.import_module(_HOMES[name])
    fn: Callable[[BuiltinContext, dict[str, Any]], dict[str, Any]] = getattr(module, f"call_{name}")
    return fn(ctx, args)
