"""`python -m cli.reference docs/cli-reference.md`: the CLI reference, generated from the command tree.

Every command and subcommand of `iterion` (walked through click's public API: the root group's
``list_commands``/``get_command``, a ``click.Context`` per level) with its ``--help`` exactly as
the terminal prints it: usage, help, examples, options. The text is formatted at a fixed width
so the file does not depend on the terminal that generated it. tests/docs/test_cli_reference.py
checks the checked-in file equals a fresh generation, so a changed command fails there with the
command that regenerates it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cli.output import echo, echo_err

REGENERATE = "python -m cli.reference docs/cli-reference.md"
WIDTH = 100

HEADER = f"""# CLI reference

Every `iterion` command with its `--help`, generated from the command tree: do not edit by hand,
regenerate with `{REGENERATE}` (tests/docs/test_cli_reference.py fails when it is stale).
The exit codes are the table in `iterion run --help` and the README; the user guide
(docs/user-guide.md) explains the commands in the order you meet them.
"""


def _context(cmd: Any, name: str, parent: Any) -> Any:
    """A context for ``cmd`` as click makes one (its own ``context_class`` and settings: typer ships
    its own click, so the classes are the command's), at the fixed width."""
    settings = {**cmd.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return cmd.context_class(cmd, info_name=name, parent=parent, **settings)


def _walk(cmd: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    """(command, its context) for ``cmd`` and every command under it, depth first, in help order."""
    yield cmd, ctx
    if hasattr(cmd, "list_commands"):  # a group
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            yield from _walk(sub, _context(sub, name, ctx))


def generate() -> str:
    """The reference as Markdown: one section per command, its help in a text block."""
    import typer

    from cli.main import get_app

    root = typer.main.get_command(get_app())
    ctx = _context(root, "iterion", None)
    parts = [HEADER]
    for cmd, sub_ctx in _walk(root, ctx):
        path = sub_ctx.command_path
        help_text = cmd.get_help(sub_ctx).rstrip()
        lines = [line.rstrip() for line in help_text.splitlines()]
        parts.append(f"## `{path}`\n\n```text\n" + "\n".join(lines) + "\n```\n")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        echo_err(f"usage: {REGENERATE}")
        return 2
    target = Path(argv[0])
    text = generate()
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)  # atomic: a reader never sees half a reference
    echo(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
