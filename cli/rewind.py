"""`iterion rewind`: back a parked run up to an earlier node and restore the files it produced."""

from __future__ import annotations

from pathlib import Path

import typer

from cli.control import sweep_orphans
from cli.errors import CliError
from cli.output import echo, echo_json
from cli.parked import store_args
from cli.preflight import check_run_writable, open_store
from iterion.invocation import command
from iterion.rewind.auto_detect import DetectedEdit
from iterion.rewind.files import FilesReport, RestoreScope
from iterion.rewind.intent import has_intent
from iterion.rewind.rewind import RewindRequest, RewindResult, rewind_run
from iterion.rewind.undo import UndoResult, undo_command, undo_rewind
from iterion.store import Store, StoreError
from persist.inputs import SOURCE_LIMIT, check_regular_file

HELP = """Move a run's checkpoint back onto a node it already executed, drop what depends on it,
and restore the workspace to what that node started from. The next `iterion resume` replays
from there (with --force after an edit of the workflow).

\b
Examples:
  iterion rewind --run-id RUN --auto              # after editing the .bot: find the edited node
  iterion rewind --run-id RUN --node implement    # name the pivot yourself
  iterion rewind --run-id RUN --node implement --restore-scope none --dry-run --json
  iterion rewind --run-id RUN                     # finish a rewind that was killed mid-way
  iterion rewind --run-id RUN --undo              # put back what the last rewind changed
"""


def _print_detected(d: DetectedEdit) -> None:
    echo("detected changes (source the run executed -> source on disk):")
    for line in d.changes or ["(none)"]:
        echo(f"  {line}")
    for node, reasons in d.impacted.items():
        echo(f"  impacts {node}: {'; '.join(reasons)}")


def _print_files(f: FilesReport, dry_run: bool) -> None:
    echo(f"files ({f.mechanism}, scope {f.scope}, to {f.anchor}):")
    if f.skip_reason:
        echo(f"  nothing restored: {f.skip_reason}")
    w = "would be " if dry_run else ""  # a dry run reports the real rewind's plan, word for word
    for p in f.restored:
        echo(f"  {w}restored {p}")
    for p in f.removed:
        echo(f"  {w}removed {p}")
    for s in f.skipped:
        echo(f"  {w}skipped {s.path} ({s.reason})")
    for p in f.overwritten:
        kept = "the pre-rewind state is banked first" if dry_run else f"kept in {f.backup_ref}"
        echo(f"  {w}overwritten {p} (not attributable to the run: changed after it stopped recording, or "
             f"while its process was dead; {kept})")
    if f.undo:
        echo(f"  to bring the overwritten files back, run: {f.undo}")
    why = {d.path: d for d in f.left_in_place_details}
    for p in f.left_in_place:
        d = why.get(p)
        reason = (f"produced by run {d.run_id}, another run of this workspace" if d is not None and d.run_id
                  else "changed since the run's last boundary, outside the scope")
        echo(f"  {w}left in place {p} ({reason})")
    if f.revert_commit:
        echo(f"  revert commit {f.revert_commit}")
    if f.backup_ref:
        echo(f"  pre-rewind state banked as {f.backup_ref}")


def _print_result(r: RewindResult, ref: str, where: list[str] | None = None) -> None:
    if r.completed_interrupted:
        verb = "would finish" if r.dry_run else "finished"
        echo(f"{verb} the interrupted rewind of run {r.run_id} (a killed rewind had begun restoring its files)")
    head = "dry run: would rewind" if r.dry_run else "rewound"
    promoted = f" (promoted from {r.promoted_from}: the whole fan-out replays)" if r.promoted_from else ""
    echo(f"{head} run {r.run_id}: {r.from_node or '-'} -> {r.to_node}{promoted}")
    echo(f"dropped outputs: {', '.join(r.dropped_nodes)}")
    if r.tombstoned_artifacts:
        arts = ", ".join(f"{n} v{','.join(map(str, vs))}" for n, vs in r.tombstoned_artifacts.items())
        echo(f"tombstoned artifacts: {arts} (kept on disk)")
    if r.orphaned_child_runs:
        kids = ", ".join(f"{run} (from {node})" for node, run in r.orphaned_child_runs.items())
        echo(f"orphaned child runs: {kids} - cancel any that is still running")
    _print_files(r.files, r.dry_run)
    if not r.dry_run:
        echo(f"status: {r.status}; continue with `{command('resume', '--run-id', ref, *(where or []))}` "
             "(add --force after editing the workflow)")
        if r.files.reverted:
            echo(f"undo this rewind with: {undo_command(ref, *(where or []))}")


def _print_undo(u: UndoResult, ref: str, where: list[str]) -> None:
    echo(f"undid the rewind of run {u.run_id} to {u.to_node}: checkpoint back at "
         f"{u.restored_checkpoint_node or '-'}, status {u.status}")
    for p in u.files_restored:
        echo(f"  put back {p}")
    for p in u.files_removed:
        echo(f"  removed {p}")
    for s in u.files_skipped:
        echo(f"  skipped {s['path']} ({s['reason']})")
    echo(f"continue with `{command('resume', '--run-id', ref, *where)}`")


def register(app: typer.Typer) -> None:

    @app.command("rewind", help=HELP,
                 short_help="Back a parked run up to an earlier node; restore the files it produced.")
    def rewind(
        run_id: str = typer.Option(..., "--run-id", help="The run to rewind (id, unique prefix or name)."),
        node: str = typer.Option(None, "--node", help="The node to replay from (omit it to finish an "
                                                      "interrupted rewind)."),
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
        undo: bool = typer.Option(False, "--undo", help="Put back the files and the checkpoint the last rewind "
                                                        "of the run changed (refused once the run moved on)."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        store_dir: Path = typer.Option(None, "--store-dir", help="The run store (default: $ITERION_STORE_DIR, "
                                                                  "else .git/iterion/store in a git repository, "
                                                                  "else .iterion/ at the project root)."),
    ) -> None:
        if undo:
            if node or auto or dry_run or restore_scope is not None or keep_files or file is not None:
                raise CliError("--undo takes only --run-id (and --store-dir, --json): it puts back what the "
                               "last rewind changed")
            _undo(run_id, store_dir, json_out)
            return
        if node and auto:
            raise CliError("give exactly one of --node NODE or --auto",
                           hint="--auto finds the node your edit affects; --node names it")
        if keep_files:
            if restore_scope not in (None, RestoreScope.NONE):
                raise CliError("--keep-files is --restore-scope none; "
                               "it cannot be combined with another scope")
            restore_scope = RestoreScope.NONE
        if file is not None and not file.is_dir():  # a FIFO or /dev/zero: bad input, before the run is locked
            check_regular_file(file, "workflow file", SOURCE_LIMIT)
        store = open_store(store_dir, write=not dry_run)  # a read-only store is refused before the sweep
        if not node and not auto and not has_intent(store, store.resolve_run(run_id)):
            # neither is accepted only to finish an interrupted rewind (the run records one)
            raise CliError("give exactly one of --node NODE or --auto",
                           hint="--auto finds the node your edit affects; --node names it")
        if not dry_run:  # nothing is written before the store and the workspace are known writable
            check_run_writable(store, run_id, workspace=restore_scope is not RestoreScope.NONE)
        store = sweep_orphans(store)  # stale `running` runs promoted first
        req = RewindRequest(run_id=run_id, node=node, auto=auto, restore_scope=restore_scope, file=file,
                            dry_run=dry_run)
        result = rewind_run(store, req, on_detected=None if json_out else _print_detected)
        if json_out:
            echo_json(result.to_json())
        else:
            _print_result(result, _name(store, result.run_id), store_args(store))


def _name(store: Store, run_id: str) -> str:
    """How hints name the run: its friendly name (unique in the store), else its id."""
    try:
        return store.load_run(run_id).name or run_id
    except StoreError:
        return run_id


def _undo(run_id: str, store_dir: Path | None, json_out: bool) -> None:
    store = open_store(store_dir, write=True)
    check_run_writable(store, run_id)
    result = undo_rewind(store, run_id)
    if json_out:
        echo_json(result.to_json())
    else:
        _print_undo(result, _name(store, result.run_id), store_args(store))
