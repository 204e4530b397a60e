"""`iterion rewind`: back a parked run up to an earlier node and restore the files it produced."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cli.control import sweep_orphans
from cli.errors import CliError
from iterion.rewind.auto_detect import DetectedEdit
from iterion.rewind.files import FilesReport, RestoreScope
from iterion.rewind.rewind import RewindRequest, RewindResult, rewind_run
from iterion.store import Store
from persist.inputs import SOURCE_LIMIT, check_regular_file

HELP = """Move a run's checkpoint back onto a node it already executed, drop what depends on it,
and restore the workspace to what that node started from. The next `iterion resume` replays
from there (with --force after an edit of the workflow).

\b
Examples:
  iterion rewind --run-id RUN --auto              # after editing the .bot: find the edited node
  iterion rewind --run-id RUN --node implement    # name the pivot yourself
  iterion rewind --run-id RUN --node implement --restore-scope none --dry-run --json
"""


def _print_detected(d: DetectedEdit) -> None:
    typer.echo("detected changes (source the run executed -> source on disk):")
    for line in d.changes or ["(none)"]:
        typer.echo(f"  {line}")
    for node, reasons in d.impacted.items():
        typer.echo(f"  impacts {node}: {'; '.join(reasons)}")


def _print_files(f: FilesReport, dry_run: bool) -> None:
    verb = "would restore" if dry_run else "restored"
    typer.echo(f"files ({f.mechanism}, scope {f.scope}, to {f.anchor}):")
    if f.skip_reason:
        typer.echo(f"  nothing restored: {f.skip_reason}")
    if dry_run:
        for p in f.in_scope:
            typer.echo(f"  {verb} {p}")
        return
    for p in f.restored:
        typer.echo(f"  restored {p}")
    for p in f.removed:
        typer.echo(f"  removed {p}")
    for s in f.skipped:
        typer.echo(f"  skipped {s.path} ({s.reason})")
    for p in f.overwritten:
        typer.echo(f"  overwritten {p} (changed after the run stopped recording it; kept in {f.backup_ref})")
    for p in f.left_in_place:
        typer.echo(f"  left in place {p} (changed since the run's last boundary, outside the scope)")
    if f.revert_commit:
        typer.echo(f"  revert commit {f.revert_commit}")
    if f.backup_ref:
        typer.echo(f"  pre-rewind state banked as {f.backup_ref}")


def _print_result(r: RewindResult) -> None:
    head = "dry run: would rewind" if r.dry_run else "rewound"
    promoted = f" (promoted from {r.promoted_from}: the whole fan-out replays)" if r.promoted_from else ""
    typer.echo(f"{head} run {r.run_id}: {r.from_node or '-'} -> {r.to_node}{promoted}")
    typer.echo(f"dropped outputs: {', '.join(r.dropped_nodes)}")
    if r.tombstoned_artifacts:
        arts = ", ".join(f"{n} v{','.join(map(str, vs))}" for n, vs in r.tombstoned_artifacts.items())
        typer.echo(f"tombstoned artifacts: {arts} (kept on disk)")
    if r.orphaned_child_runs:
        kids = ", ".join(f"{run} (from {node})" for node, run in r.orphaned_child_runs.items())
        typer.echo(f"orphaned child runs: {kids} - cancel any that is still running")
    _print_files(r.files, r.dry_run)
    if not r.dry_run:
        typer.echo(f"status: {r.status}; continue with `iterion resume --run-id {r.run_id}` "
                   "(add --force after editing the workflow)")


def register(app: typer.Typer) -> None:

    @app.command("rewind", help=HELP,
                 short_help="Back a parked run up to an earlier node; restore the files it produced.")
    def rewind(
        run_id: str = typer.Option(..., "--run-id", help="The run to rewind (id, unique prefix or name)."),
        node: str = typer.Option(None, "--node", help="The node to replay from."),
        auto: bool = typer.Option(False, "--auto", help="Diff the executed source against the source on disk "
                                                        "and rewind to the earliest node the edit affects."),
        restore_scope: RestoreScope = typer.Option(
            None, "--restore-scope", case_sensitive=False,
            help="Which files come back: produced (in-place default), full (worktree default), none."),
        file: Path = typer.Option(None, "--file",
                                  help="The workflow source, when not where the run recorded it."),
        keep_files: bool = typer.Option(False, "--keep-files", hidden=True,
                                        help="Former name of --restore-scope none."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Show what would happen; change nothing."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        store_dir: Path = typer.Option(None, "--store-dir", help="The run store (default: .iterion/ at the "
                                                                  "project root, or $ITERION_STORE_DIR)."),
    ) -> None:
        if bool(node) == bool(auto):
            raise CliError("give exactly one of --node NODE or --auto",
                           hint="--auto finds the node your edit affects; --node names it")
        if keep_files:
            if restore_scope not in (None, RestoreScope.NONE):
                raise CliError("--keep-files is --restore-scope none; "
                               "it cannot be combined with another scope")
            restore_scope = RestoreScope.NONE
        if file is not None and not file.is_dir():  # a FIFO or /dev/zero: bad input, before the run is locked
            check_regular_file(file, "workflow file", SOURCE_LIMIT)
        store = sweep_orphans(Store.open(store_dir, Path.cwd()))  # stale `running` runs promoted first
        req = RewindRequest(run_id=run_id, node=node, auto=auto, restore_scope=restore_scope, file=file,
                            dry_run=dry_run)
        result = rewind_run(store, req, on_detected=None if json_out else _print_detected)
        if json_out:
            typer.echo(json.dumps(result.to_json(), indent=2, default=str))
        else:
            _print_result(result)
