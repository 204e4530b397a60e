"""`iterion` entry point: builds the typer app from the per-area command modules."""

from __future__ import annotations

import typer

from cli.errors import run_guarded
from cli.output import echo, guard_std_streams
from iterion import __version__

app = typer.Typer(
    name="iterion",
    help="Durable, rewindable workflows over a git-native workspace.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        echo(f"iterion {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Durable, rewindable workflows over a git-native workspace."""


# --- command registration: one line per area module (keep this block sorted) ---
# (each module exposes `register(app)`)
import cli.backends; cli.backends.register(app)  # noqa: E402,E702
import cli.control; cli.control.register(app)  # noqa: E402,E702
import cli.gc_cmd; cli.gc_cmd.register(app)  # noqa: E402,E702
import cli.refs; cli.refs.register(app)  # noqa: E402,E702
import cli.rewind; cli.rewind.register(app)  # noqa: E402,E702
import cli.run; cli.run.register(app)  # noqa: E402,E702
import cli.track; cli.track.register(app)  # noqa: E402,E702
import cli.validate; cli.validate.register(app)  # noqa: E402,E702
# --- end of command registration ---


def main() -> None:
    guard_std_streams()  # a closed stdout/stderr (`| head`) never stops a run: see cli/output.py
    run_guarded(app)


if __name__ == "__main__":
    main()
