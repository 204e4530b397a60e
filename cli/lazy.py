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

Parsing a command line costs no pydantic for the common values (see ``PlainRuntimeParam``):
typer 0.29 coerces every parameter through a pydantic TypeAdapter, built on first use, which
imports pydantic (about 60 ms) even for ``iterion validate demo.bot``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from pathlib import Path, PurePath
from typing import Any

import typer
from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_path
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
    _parse_plainly(cmd)
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


# -- coercion without pydantic for what a command line gives ---------------------------------
_NOT_PLAIN = object()


def _plain_leaf(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    """What typer's pydantic adapter returns for ``value``, computed without it; ``_NOT_PLAIN``
    when this is not one of the cases known to be identical (the real adapter decides those)."""
    if type(value) is not str or info.parser is not None:
        return _NOT_PLAIN
    if annotation is str:  # typer's str adapter: a str stays itself
        return value
    if annotation is Path and info.path_type is None and not info.allow_dash and value and str(Path(value)) == value:
        # typer's adapter validates Path(value) with pydantic (the same Path) and then calls this with
        # it; only for a spelling Path keeps as it is, so messages quoting ``value`` read the same
        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    return _NOT_PLAIN


class PlainRuntimeParam(RuntimeParam):  # (typer's frozen dataclass: no field of its own to add)
    """A parameter's coercion that needs no pydantic for the values a command line gives: None,
    a str option, a plainly spelled Path, lists of those. Anything else (a number, a choice, a
    ``./x`` path, a parser) goes to the adapter typer builds, so the result and every error
    message are typer's own. ``value is None`` never gets here (``RuntimeParam.coerce``)."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        annotation, info = self.annotation, self.parameter_info
        if isinstance(value, (list, tuple)) and getattr(annotation, "__origin__", None) is list:
            item = annotation.__args__[0]
            items = [_plain_leaf(item, info, v, param, ctx) for v in value]
            if not any(i is _NOT_PLAIN for i in items):
                return items  # typer's list adapter: each item as a leaf, in a list
        else:
            out = _plain_leaf(annotation, info, value, param, ctx)
            if out is not _NOT_PLAIN:
                return out
        real = build_runtime_param(param.type_descriptor)
        param._runtime_param = real
        return real._coerce_value(value, param, ctx)


def _parse_plainly(cmd: Any) -> None:
    """Every parameter of ``cmd`` (its --help too, which click makes per context) gets the
    pydantic-free coercion before ``cmd`` parses a command line."""
    parse = cmd.parse_args

    def parse_args(ctx: Any, args: list[str]) -> list[str]:
        for param in cmd.get_params(ctx):
            plain_coercion(param)
        return parse(ctx, args)

    cmd.parse_args = parse_args


def plain_coercion(param: Any) -> None:
    """Give ``param`` the pydantic-free coercion (before typer builds its adapter on first use)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None or desc.file_annotation is not None or getattr(param, "_runtime_param", 0) is not None:
        return
    param._runtime_param = PlainRuntimeParam(parameter_info=desc.parameter_info, annotation=desc.annotation)


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

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        for param in self.get_params(ctx):  # (typer adds --help and the completion options late)
            plain_coercion(param)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(s.name, s.summary) for s in self.specs]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
