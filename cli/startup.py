"""What the CLI knows before it imports typer: the command table's entry type, and the answers
to ``iterion --version`` and ``iterion --help`` (issue 14, point 10: both under 100 ms).

Importing typer (and its vendored click) costs about as much as starting Python itself, and these
two answers need nothing from it: the version is a constant and the root help is built from the
static command table. So ``cli.main.main`` answers exactly ``--version``, ``--help`` and ``-h``
here and hands every other command line to typer.

Invariant: the text printed here is byte-for-byte what typer prints for the same command line at
the same terminal width and program name (click's plain formatter: ``HelpFormatter``,
``wrap_text``, ``write_dl``). tests/cli/test_startup.py compares the two at several widths, so a
new root option or a typer upgrade that changes the layout fails there rather than drifting.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple


class LazyCommand(NamedTuple):  # (no dataclass: importing dataclasses costs as much as the answer)
    """A command of the root group: its ``name``, the ``module`` whose ``register(app)`` adds it,
    and the one-line ``summary`` ``--help`` lists."""

    name: str
    module: str
    summary: str


ROOT_HELP = "Durable, rewindable workflows over a git-native workspace."
VERSION_HELP = "Print the version and exit."
QUIET_HELP = "No notices on stderr (the slow-path note, logged warnings); errors and output unchanged."
QUIET_ENV = "ITERION_QUIET"  # (workspacetrack/fastext.py reads it; kept equal by tests/cli/test_quiet.py)
HELP_OPTIONS = ("-h", "--help")
MAX_CONTENT_WIDTH = 160  # the root context's max_content_width

# the root group's options as typer lists them (its completion options, then help)
ROOT_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--version", VERSION_HELP),
    ("--quiet", QUIET_HELP),
    ("--install-completion", "Install completion for the current shell."),
    ("--show-completion", "Show completion for the current shell, to copy it or customize the installation."),
    (", ".join(HELP_OPTIONS), "Show this message and exit."),
)


# -- click's plain help layout (typer/_click/formatting.py), for the one page printed here ------------
class _Wrapper(textwrap.TextWrapper):
    def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str], cur_len: int,
                          width: int) -> None:
        # click cuts a word longer than the line at the space left, never breaking on hyphens
        space_left = max(width - cur_len, 1)
        last = reversed_chunks[-1]
        cur_line.append(last[:space_left])
        reversed_chunks[-1] = last[space_left:]


def _wrap(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """click's ``wrap_text`` for text without ``\\b`` blocks: paragraphs rewrapped, kept apart."""
    paragraphs: list[tuple[int, str]] = []
    buf: list[str] = []
    indent: int | None = None
    for line in text.expandtabs().splitlines() + [""]:
        if not line:
            if buf:
                paragraphs.append((indent or 0, " ".join(buf)))
                buf = []
            indent = None
            continue
        if indent is None:
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            line = stripped
        buf.append(line)
    out = []
    for extra, para in paragraphs:
        wrapper = _Wrapper(width, initial_indent=initial_indent + " " * extra,
                           subsequent_indent=subsequent_indent + " " * extra, replace_whitespace=False)
        out.append(wrapper.fill(para))
    return "\n\n".join(out)


def _usage(prog: str, args: str, width: int) -> str:
    prefix = f"Usage: {prog} "
    if width >= len(prefix) + 20:
        _wrapped = _Wrapper(width, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                            replace_whitespace=False).fill(args)
        return _wrapped + "\n"
    indent = " " * (len("Usage: ") + 4)
    return prefix + "\n" + _Wrapper(width, initial_indent=indent, subsequent_indent=indent,
                                     replace_whitespace=False).fill(args) + "\n"


def _dl(rows: Sequence[tuple[str, str]], width: int, indent: int = 2, col_max: int = 30,
        spacing: int = 2) -> str:
    first_col = min(max(len(a) for a, _ in rows), col_max) + spacing
    out = []
    for first, second in rows:
        out.append(" " * indent + first)
        if len(first) <= first_col - spacing:
            out.append(" " * (first_col - len(first)))
        else:
            out.append("\n" + " " * (first_col + indent))
        lines = _wrap(second, max(width - first_col - 2, 10)).splitlines()
        out.append(lines[0] + "\n")
        out.extend(" " * (first_col + indent) + line + "\n" for line in lines[1:])
    return "".join(out)


def help_width() -> int:
    """click's help width: the terminal's (or $COLUMNS) capped at the root's 160, minus 2, at least 50."""
    import shutil

    return max(min(shutil.get_terminal_size().columns, MAX_CONTENT_WIDTH) - 2, 50)


def program_name(argv0: str | None = None, main_module: ModuleType | None = None) -> str:
    """The name click shows in ``Usage:`` (its ``_detect_program_name``): the script's file name,
    or ``python -m pkg.mod`` when run as a module."""
    main_module = main_module if main_module is not None else sys.modules["__main__"]
    path = argv0 if argv0 is not None else sys.argv[0]
    package = getattr(main_module, "__package__", None)
    if package in (None, ""):
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = str(package) if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def root_help(commands: Sequence[LazyCommand], prog: str, width: int) -> str:
    """The text ``iterion --help`` prints (without the final newline, as click's ``get_help``)."""
    page = _usage(prog, "[OPTIONS] COMMAND [ARGS]...", width)
    page += "\n" + _wrap(ROOT_HELP, width, "  ", "  ") + "\n"
    page += "\nOptions:\n" + _dl(ROOT_OPTIONS, width)
    if commands:
        page += "\nCommands:\n" + _dl([(c.name, c.summary) for c in commands], width)
    return page.rstrip("\n")


def set_quiet() -> None:
    """``iterion --quiet``: ``ITERION_QUIET=1`` for this process and the ones it starts (runners,
    tools' own iterion calls), and iterion's logged notices (below errors) dropped."""
    import logging

    os.environ[QUIET_ENV] = "1"
    logging.getLogger("iterion").setLevel(logging.ERROR)


def _completing() -> bool:
    return any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)


def answer_without_typer(argv: Sequence[str], commands: Sequence[LazyCommand], version: str) -> str | None:
    """The whole output of ``iterion --version`` / ``--help`` / ``-h``, or None when ``argv`` is
    any other command line (typer parses it). A shell-completion request always goes to typer."""
    if len(argv) != 1 or _completing():
        return None
    if argv[0] == "--version":
        return f"iterion {version}"
    if argv[0] in HELP_OPTIONS:
        return root_help(commands, program_name(), help_width())
    return None


def plain_validate(argv: Sequence[str]) -> tuple[list[str], bool] | None:
    """``iterion validate FILE... [--json]`` as typer parses it: (the files, --json), or None for
    any other command line (typer parses it: an option other than --json, ``-``, ``--``, an empty
    word, no file, a completion request).

    Invariant: for every command line answered here, typer gives `validate` the same
    ``Path(word)`` files and flag, and accepts them: a path that exists but cannot be read (which
    typer refuses with a usage error) is left to typer. tests/cli/test_startup.py runs command
    lines through both and compares output and exit status.
    """
    if len(argv) < 2 or argv[0] != "validate" or _completing():
        return None
    from pathlib import Path  # (not for --version and --help)

    files, as_json = [], False
    for word in argv[1:]:
        if word == "--json":
            as_json = True
        elif not word or word.startswith("-"):
            return None
        elif os.path.exists(Path(word)) and not os.access(Path(word), os.R_OK):  # (what typer checks)
            return None
        else:
            files.append(word)
    return (files, as_json) if files else None


# `inspect`'s options answered without typer: flags, and options taking one value
_INSPECT_FLAGS = {"--json": "as_json", "--all": "show_all", "--events": "events"}
_INSPECT_VALUES = {"--run-id": "run_id", "--store-dir": "store_dir", "--nats": "nats"}


def plain_inspect(argv: Sequence[str]) -> dict[str, object] | None:
    """``iterion inspect [--run-id ID] [--events] [--all] [--store-dir DIR] [--nats URL] [--json]`` as typer
    parses it: the keyword arguments of ``cli.inspect_cmd.inspect_cmd`` (a directory as a Path), or
    None for any other command line (typer parses it).

    Why: typer 0.29 coerces every non-flag parameter through a pydantic TypeAdapter, so any
    command typer runs imports pydantic (about as much as the rest of the listing); the run list
    is the command people type most, and reads run documents without a document model.

    Invariant: for every command line answered here, typer calls ``inspect_cmd`` with the same
    arguments (an option given twice, ``--opt=value``, a value that is empty or starts with ``-``,
    or any other word is left to typer). tests/cli/test_startup.py runs command lines through both
    and compares output and exit status.
    """
    if not argv or argv[0] != "inspect" or _completing():
        return None
    out: dict[str, object] = {}
    words = list(argv[1:])
    while words:
        word = words.pop(0)
        if word in _INSPECT_FLAGS and _INSPECT_FLAGS[word] not in out:
            out[_INSPECT_FLAGS[word]] = True
        elif word in _INSPECT_VALUES and _INSPECT_VALUES[word] not in out and words \
                and words[0] and not words[0].startswith("-"):
            out[_INSPECT_VALUES[word]] = words.pop(0)
        else:
            return None
    if "store_dir" in out:
        from pathlib import Path

        out["store_dir"] = Path(str(out["store_dir"]))
    return out
