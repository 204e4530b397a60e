"""`iterion` entry point: the typer app, with each command's module imported only when it runs.

Start-up is part of the interface (issue 14, point 10): ``iterion --version`` and ``--help``
are answered before typer is imported (cli/startup.py), and so is the plain
``iterion validate FILE... [--json]``; a typo imports typer and cli/output.py,
never the engine, the DSL compiler, pygit2 or httpx. The
table below names every command, the module whose ``register(app)`` adds it, and the one-line
summary ``--help`` lists (tests/cli/test_startup.py keeps it in step with the modules).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from cli.output import echo, guard_std_streams
from cli.startup import (
    QUIET_HELP,
    ROOT_HELP,
    VERSION_HELP,
    LazyCommand,
    answer_without_typer,
    plain_inspect,
    plain_validate,
    set_quiet,
)
from iterion import __version__

if TYPE_CHECKING:
    import typer

# --- command registration: one entry per command, in --help order (module exposes register(app)) ---
COMMANDS = (
    LazyCommand("backends", "cli.backends", "List the LLM backends and whether each is usable."),
    LazyCommand("bundle", "cli.bundle", "Bundles: a directory holding main.bot, prompts/, presets/ and manifest.yaml."),
    LazyCommand("doctor", "cli.doctor", "Check what iterion needs on this machine (git, bubblewrap...), with fixes."),
    LazyCommand("cancel", "cli.control", "Cancel a run; it stays resumable from its checkpoint."),
    LazyCommand("pause", "cli.control", "Pause a running run at its next node boundary."),
    LazyCommand("fork", "cli.control",
                "Create a new child run from the turn checkpoint recorded before an LLM node executed."),
    LazyCommand("reconcile", "cli.control",
                "Promote orphaned runs (running, but their process is gone) to a resumable status."),
    LazyCommand("rewind", "cli.rewind", "Back a parked run up to an earlier node; restore the files it produced."),
    LazyCommand("dev", "cli.dev", "Run a workflow, watch its files, rewind and resume on each save."),
    LazyCommand("run", "cli.run", "Run a workflow from its entry node, checkpointing after every node."),
    LazyCommand("resume", "cli.run",
                "Continue a paused, failed_resumable or cancelled run from its checkpoint (same run id)."),
    LazyCommand("inspect", "cli.inspect_cmd",
                "List runs, or show one run: status, failure, checkpoint node, outputs, boundaries, budget."),
    LazyCommand("artifacts", "cli.readers",
                "List a run's published artifacts (node, version, size, created, tombstoned), or read one."),
    LazyCommand("attachments", "cli.readers",
                "List a run's attachments (launch inputs, file answers), or read one byte-for-byte."),
    LazyCommand("init", "cli.run",
                "Scaffold a demo project (a workflow plus the script backend's answers) you can run at once."),
    LazyCommand("validate", "cli.validate",
                "Check workflows and print every diagnostic as FILE:LINE:COL: CODE severity: message."),
    LazyCommand("diagram", "cli.validate", "Print the compiled workflow as a Mermaid flowchart."),
    LazyCommand("lsp", "cli.lsp_cmd",
                "Run the .bot language server on stdin/stdout (for editors: diagnostics, hover, navigation)."),
    LazyCommand("refs", "cli.refs",
                "A worktree run's git refs: boundaries, produced scope, banks, reverts, checkpoint pushes."),
    LazyCommand("track", "cli.track",
                "Version an in-place run's workspace outside it (content-hashed snapshots)."),
    LazyCommand("gc", "cli.gc_cmd",
                "Delete the snapshots, objects, worktrees and refs that only finished or deleted runs need."),
    LazyCommand("server", "cli.server_cmd", "Serve the run store over HTTP (API + web timeline)."),
    LazyCommand("remote", "cli.remote_cmd", "Operate runs on an `iterion server` over HTTP."),
    LazyCommand("runner", "cli.runner_cmd", "Claim queued runs from NATS JetStream and execute them."),
)
# --- end of command registration ---


def _build_app() -> typer.Typer:
    import typer

    from cli.lazy import LazyGroup

    class _Root(LazyGroup):
        specs = COMMANDS

    app = typer.Typer(
        name="iterion",
        cls=_Root,
        help=ROOT_HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 160},
    )

    def _version(value: bool) -> None:
        if value:
            echo(f"iterion {__version__}")
            raise typer.Exit()

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help=VERSION_HELP),
        quiet: bool = typer.Option(False, "--quiet", help=QUIET_HELP),
    ) -> None:
        """Durable, rewindable workflows over a git-native workspace."""
        if quiet:
            set_quiet()

    return app


_app: typer.Typer | None = None


def get_app() -> typer.Typer:
    """The typer app, built (and typer imported) on first use: see cli/startup.py."""
    global _app
    if _app is None:
        _app = _build_app()
    return _app


def __getattr__(name: str) -> Any:  # `from cli.main import app` builds it
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    guard_std_streams()  # a closed stdout/stderr (`| head`) never stops a run: see cli/output.py
    fast = answer_without_typer(sys.argv[1:], COMMANDS, __version__)  # --version, --help: no typer
    if fast is not None:
        from cli.exit_codes import ExitCode  # (enum and gitrefs.persist's error codes only)

        echo(fast)
        sys.exit(ExitCode.OK)
    from cli.errors import run_guarded  # gitrefs.persist's errors only: no pydantic, no engine

    plain = plain_validate(sys.argv[1:])  # `validate FILE... [--json]`: no typer either
    if plain is not None:
        from pathlib import Path

        from cli.validate import check

        files, as_json = plain
        run_guarded(lambda: sys.exit(check([Path(f) for f in files], as_json)))
    listing = plain_inspect(sys.argv[1:])  # the run list and one run's detail: no typer coercion either
    if listing is not None:
        from cli.inspect_cmd import inspect_cmd

        run_guarded(lambda: inspect_cmd(**{**INSPECT_DEFAULTS, **listing}))
    run_guarded(get_app())


# inspect_cmd's other parameters as typer passes them when their options are absent
INSPECT_DEFAULTS: dict[str, Any] = {"run_id": None, "events": False, "show_all": False, "limit": None, "status": [],
                                    "workflow": None, "since": None, "after": None, "event_type": [],
                                    "event_node": [], "follow": False, "store_dir": None, "nats": None,
                                    "as_json": False, "show_boundaries": False}


if __name__ == "__main__":
    main()
