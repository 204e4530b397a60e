"""`iterion bundle pack DIR [-o x.botz]`: a bundle directory as one deterministic archive."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.errors import CliError
from cli.output import echo, echo_err, echo_json
from gitrefs.persist.atomic import atomic_write_bytes
from iterion.dsl import Severity, load_workflow
from iterion.dsl.pack import pack_bundle

bundle_app = typer.Typer(help="Bundles: a directory holding main.bot, prompts/, presets/ and manifest.yaml.\n\n"
                              "Example: iterion bundle pack my-bot -o my-bot.botz",
                         no_args_is_help=True)


@bundle_app.command("pack")
def pack(
    directory: Path = typer.Argument(..., help="The bundle directory (main.bot inside)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="The archive to write (default: DIR.botz beside DIR). Example: -o my-bot.botz"),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Pack a bundle directory into a .botz (tar.gz) that validate, run and resume accept.

    The archive is deterministic: the same files give the same bytes (sorted members, zero
    timestamps and owners, fixed modes). Hidden files and __pycache__ are left out; the bundle
    must validate first (errors refuse, exit 2).

    Example: iterion bundle pack my-bot -o my-bot.botz && iterion run my-bot.botz
    """
    result = load_workflow(directory) if directory.is_dir() else None
    if result is not None and not result.ok:
        for d in result.diagnostics:
            echo_err(d.format())
        errors = sum(1 for d in result.diagnostics if d.severity is Severity.ERROR)
        raise CliError(f"{directory} does not validate ({errors} error(s)); nothing was packed",
                       hint="fix the errors above, then pack again")
    packed = pack_bundle(directory)
    target = output or directory.resolve().parent / f"{directory.resolve().name}.botz"
    if target.resolve().is_relative_to(directory.resolve()):
        raise CliError(f"{target} is inside the bundle it packs", hint="write the archive outside the directory (-o)")
    if target.is_dir():
        raise CliError(f"-o {target} is a directory", hint=f"name the archive file, e.g. -o {target / 'bundle.botz'}")
    if not target.parent.is_dir():  # a typo in -o never creates directories
        from iterion.shellquote import printed_word

        if target.parent.exists():
            raise CliError(f"-o {target}: {target.parent} is not a directory", hint="write the archive elsewhere")
        raise CliError(f"-o {target}: the directory {target.parent} does not exist",
                       hint=f"create it first (mkdir -p {printed_word(str(target.parent))}) or write the archive elsewhere")
    atomic_write_bytes(target, packed.data)
    if as_json:
        echo_json({"archive": str(target), "bytes": len(packed.data), "members": packed.members})
        return
    echo(f"packed {directory} -> {target} ({len(packed.members)} files, {len(packed.data)} bytes)")


def register(app: typer.Typer) -> None:
    app.add_typer(bundle_app, name="bundle")
