"""`iterion validate` and `iterion diagram`: the `.bot` front end on the command line.

The commands are defined when typer registers them (``register``): ``check``, the work of
`validate`, imports no typer, so `iterion validate FILE... [--json]` runs without it
(cli/startup.py ``plain_validate``; issue 14, point 10).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cli.errors import CliError
from cli.exit_codes import ExitCode
from cli.output import echo, echo_err, echo_json
from gitrefs.persist.text import one_line
from iterion.dsl import CompileResult, Severity, load_workflow

if TYPE_CHECKING:
    import typer


def _counts(result: CompileResult) -> tuple[int, int]:
    errors = sum(1 for d in result.diagnostics if d.severity is Severity.ERROR)
    return errors, len(result.diagnostics) - errors


def unusable_here(f: Path, result: CompileResult) -> list[str]:
    """The compiled workflow's LLM nodes whose backend is unusable on this machine, one message
    each: what `iterion run` would refuse here (iterion/backends/usable.py; machine-dependent, so
    a separate warning, never a diagnostic of the file)."""
    if result.workflow is None:
        return []
    import os

    from iterion.backends.script import find_script_file
    from iterion.backends.usable import llm_nodes, unusable_nodes

    if not llm_nodes(result.workflow):  # (no backend is even imported for a workflow without one)
        return []
    return [u.message() for u in unusable_nodes(result.workflow, os.environ, script_file=find_script_file(f))]


def check(files: list[Path], as_json: bool) -> ExitCode:
    """`iterion validate`: every diagnostic of every file (JSON with ``as_json``); REFUSED when
    any file has an error, else OK. Nodes whose backend is unusable on this machine are warned
    about (``unusable_backends`` in JSON), without changing the exit status."""
    results = [(f, load_workflow(f)) for f in files]
    failed = any(not r.ok for _, r in results)
    if as_json:
        payload = {
            "ok": not failed,
            "files": [{"path": str(f), "ok": r.ok, "errors": _counts(r)[0], "warnings": _counts(r)[1],
                       "diagnostics": [d.to_json() for d in r.diagnostics],
                       "unusable_backends": unusable_here(f, r)} for f, r in results],
        }
        echo_json(payload)
    else:
        for f, r in results:
            for d in r.diagnostics:
                echo(d.format())
            for message in unusable_here(f, r):
                echo_err(f"warning: {one_line(str(f))}: {message} (`iterion run` would refuse it here)")
            errors, warnings = _counts(r)
            status = "ok" if r.ok else "invalid"
            echo_err(f"{one_line(str(f))}: {status} ({errors} error(s), {warnings} warning(s))")
    return ExitCode.REFUSED if failed else ExitCode.OK


def register(app: typer.Typer) -> None:
    import typer

    def validate(
        files: list[Path] = typer.Argument(..., help="Workflow files (.bot/.iter), bundle directories or .botz archives."),
        as_json: bool = typer.Option(False, "--json", help="Print the diagnostics as JSON."),
    ) -> None:
        """Check workflows and print every diagnostic as FILE:LINE:COL: CODE severity: message.

        Exits 2 when any file has an error (an invalid workflow is refused input), 0 when there are only warnings.

        Example: iterion validate review.bot lib/bundle/ --json
        """
        code = check(files, as_json)
        if code:
            raise typer.Exit(code)

    def diagram(
        file: Path = typer.Argument(..., help="A workflow file, bundle directory or .botz archive."),
        as_json: bool = typer.Option(False, "--json", help='Print {"workflow": NAME, "mermaid": TEXT}.'),
    ) -> None:
        """Print the compiled workflow as a Mermaid flowchart.

        Example: iterion diagram review.bot > review.mmd
        """
        from iterion.dsl.diagram import to_mermaid  # `diagram` only: validate never draws
        from iterion.invocation import command

        result = load_workflow(file)
        if result.workflow is None:
            for d in result.diagnostics:
                echo_err(d.format())
            errors, _ = _counts(result)
            raise CliError(f"{file} does not compile ({errors} error(s))",
                           hint=f"{command('validate', str(file))} lists every diagnostic", exit_code=ExitCode.REFUSED)
        text = to_mermaid(result.workflow)
        if as_json:
            echo_json({"workflow": result.workflow.name, "mermaid": text})
        else:
            echo(text, nl=False)

    app.command("validate")(validate)
    app.command("diagram")(diagram)
