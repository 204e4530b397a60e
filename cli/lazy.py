"""A command group that imports a command's module only when that command runs.

`iterion --version`, `iterion --help` and a typo never import the engine, the DSL compiler,
pygit2 or httpx: the root group knows each command by a static entry (name, module, one-line
summary) and imports the module (calling its ``register(app)``) the first time the command is
resolved. ``--help`` lists every command from the static summaries without importing any.

Invariant: the static table and the modules agree (same command names per module, same
summaries); tests/cli/test_startup.py checks it, so a new command that forgets its entry fails
there rather than silently missing from ``--help``.

Loaded commands are shown to people plainly: help is click's plain formatter (no Rich, so help
costs no Rich import and prints literally), and every option's type is a word (TEXT, INTEGER,
NUMBER, PATH, a|b choices) rather than ``<str>``/``<list[str]>``.

Only typer's public API is used (``typer.Typer``, ``typer.main.get_group``, ``typer.core``):
typer 0.29 coerces a loaded command's parameters through pydantic, which costs that command's
start-up a pydantic import; ``--version``, ``--help`` and ``validate`` never reach typer
(cli/startup.py), so they do not pay it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from pathlib import PurePath
from typing import Any

import typer
from typer.core import TyperGroup

from cli.startup import LazyCommand

_loaded: dict[str, dict[str, Any]] = {}  # module -> its commands (click objects), loaded once


def load_module_commands(module: str) -> dict[str, Any]:
    """The click commands ``module.register(app)`` adds, made plain for people (see module doc)."""
    if module not in _loaded:
        sub = typer.Typer(add_completion=False, rich_markup_mode=None)
        importlib.import_module(module).register(sub)
        group = typer.main.get_group(sub)
        for cmd in group.commands.values():
            humanize(cmd)
        _loaded[module] = dict(group.commands)
    return _loaded[module]


# -- types as words ---------------------------------------------------------------------------
_WORDS = {int: "INTEGER", float: "NUMBER", str: "TEXT", bool: "BOOLEAN"}


def type_word(param: Any) -> str | None:
    """A word for what ``param`` takes (None for a flag, which takes nothing)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        if desc.is_choice and desc.choices:
            return "|".join(str(getattr(c, "value", c)) for c in desc.choices)
        annotation = desc.annotation
        origin_args = getattr(annotation, "__args__", None)
        if desc.is_list and origin_args:
            annotation = origin_args[0]
        if desc.is_path or (isinstance(annotation, type) and issubclass(annotation, PurePath)):
            return "PATH"
        if annotation in _WORDS:
            return _WORDS[annotation]
        if isinstance(annotation, type):
            return annotation.__name__.upper()
    name = getattr(getattr(param, "type", None), "name", None)
    return str(name).upper() if name else None


def humanize(cmd: Any) -> None:
    """Plain help and word types for ``cmd`` and, for a group, every command under it."""
    if hasattr(cmd, "rich_markup_mode"):
        cmd.rich_markup_mode = None
    for param in getattr(cmd, "params", []):
        if getattr(param, "metavar", None) is not None:
            continue
        word = type_word(param)
        if word is None:
            continue
        if getattr(param, "param_type_name", "") == "argument":  # its name stays; the type is a word
            param.display_type_rich = lambda ctx, w=word: w
        else:
            param.metavar = word
    for sub in getattr(cmd, "commands", {}).values():
        humanize(sub)
        if sub.short_help is None and sub.help:  # listed whole and wrapped, never cut with "..."
            sub.short_help = sub.help.strip().split("\n\n")[0].replace("\n", " ")


# -- the root group ---------------------------------------------------------------------------
class _LazyCommands(MutableMapping[str, Any]):
    """The root group's commands: the static names, each loaded on first access."""

    def __init__(self, specs: dict[str, LazyCommand]) -> None:
        self._specs = specs
        self._extra: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._extra:
            return self._extra[name]
        spec = self._specs[name]  # KeyError: no such command
        return load_module_commands(spec.module)[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._extra[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._extra[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._specs
        yield from (n for n in self._extra if n not in self._specs)

    def __len__(self) -> int:
        return len(set(self._specs) | set(self._extra))


class LazyGroup(TyperGroup):
    """The root group; subclasses set ``specs`` (the static table, in ``--help`` order)."""

    specs: tuple[LazyCommand, ...] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.rich_markup_mode = None
        self.commands = _LazyCommands({s.name: s for s in self.specs})

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(s.name, s.summary) for s in self.specs]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
