"""`iterion rewind`: back a parked run up to an earlier node and restore the files it produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from cli.control import sweep_orphans
from cli.errors import CliError
from cli.output import echo, echo_json
from cli.parked import store_args
from cli.preflight import check_run_writable, open_store
from gitrefs.persist.inputs import SOURCE_LIMIT, check_regular_file
from iterion.invocation import command
from iterion.rewind.auto_detect import DetectedEdit
from iterion.rewind.files import RestoreScope
from iterion.rewind.intent import has_intent
from iterion.rewind.undo import undo_command
from iterion.store import Store, StoreError

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


print_detected = _print_detected  # `iterion dev` prints the same report (cli/dev.py)


def print_files(f: dict[str, Any], dry_run: bool) -> None:
    """A rewind's ``files`` (FilesReport.to_json()): the local verb and `iterion remote` print it alike."""
    echo(f"files ({f['mechanism']}, scope {f['scope']}, to {f['anchor']}):")
    if f.get("skip_reason"):
        echo(f"  nothing restored: {f['skip_reason']}")
    w = "would be " if dry_run else ""  # a dry run reports the real rewind's plan, word for word
    for p in f.get("restored") or []:
        echo(f"  {w}restored {p}")
    for p in f.get("removed") or []:
        echo(f"  {w}removed {p}")
    for s in f.get("skipped") or []:
        echo(f"  {w}skipped {s['path']} ({s['reason']})")
    for p in f.get("overwritten") or []:
        kept = "the pre-rewind state is banked first" if dry_run else f"kept in {f.get('backup_ref')}"
        echo(f"  {w}overwritten {p} (not attributable to the run: changed after it stopped recording, or "
             f"while its process was dead; {kept})")
    if f.get("undo"):
        echo(f"  to bring the overwritten files back, run: {f['undo']}")
    why = {d["path"]: d for d in f.get("left_in_place_details") or []}
    for p in f.get("left_in_place") or []:
        d = why.get(p)
        reason = (f"produced by run {d['run_id']}, another run of this workspace" if d is not None and d.get("run_id")
                  else "changed since the run's last boundary, outside the scope")
        echo(f"  {w}left in place {p} ({reason})")
    if f.get("revert_commit"):
        echo(f"  revert commit {f['revert_commit']}")
    if f.get("backup_ref"):
        echo(f"  pre-rewind state banked as {f['backup_ref']}")


def print_result(r: dict[str, Any], resume_cmd: str, undo_cmd: str) -> None:
    """A rewind's result (RewindResult.to_json()); ``resume_cmd``/``undo_cmd`` how to go on."""
    dry_run = bool(r.get("dry_run"))
    if r.get("completed_interrupted"):
        verb = "would finish" if dry_run else "finished"
        echo(f"{verb} the interrupted rewind of run {r['run_id']} (a killed rewind had begun restoring its files)")
    head = "dry run: would rewind" if dry_run else "rewound"
    promoted = f" (promoted from {r['promoted_from']}: the whole fan-out replays)" if r.get("promoted_from") else ""
    echo(f"{head} run {r['run_id']}: {r.get('from_node') or '-'} -> {r['to_node']}{promoted}")
    echo(f"dropped outputs: {', '.join(r.get('dropped_nodes') or [])}")
    if r.get("tombstoned_artifacts"):
        arts = ", ".join(f"{n} v{','.join(map(str, vs))}" for n, vs in r["tombstoned_artifacts"].items())
        echo(f"tombstoned artifacts: {arts} (kept on disk)")
    if r.get("orphaned_child_runs"):
        kids = ", ".join(f"{run} (from {node})" for node, run in r["orphaned_child_runs"].items())
        echo(f"orphaned child runs: {kids} - cancel any that is still running")
    print_files(r["files"], dry_run)
    if not dry_run:
        echo(f"status: {r.get('status')}; continue with `{resume_cmd}` (add --force after editing the workflow)")
        if r["files"].get("reverted"):
            echo(f"undo this rewind with: {undo_cmd}")


def print_undo(u: dict[str, Any], resume_cmd: str) -> None:
    """An undone rewind (UndoResult.to_json())."""
    echo(f"undid the rewind of run {u['run_id']} to {u['to_node']}: checkpoint back at "
         f"{u.get('restored_checkpoint_node') or '-'}, status {u['status']}")
    for p in u.get("files_restored") or []:
        echo(f"  put back {p}")
    for p in u.get("files_removed") or []:
        echo(f"  removed {p}")
    for s in u.get("files_skipped") or []:
        echo(f"  skipped {s['path']} ({s['reason']})")
    echo(f"continue with `{resume_cmd}`")


def rewind_cmd(
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
                                                              "else <project>/.iterion)."),
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
    from iterion import api  # one path from a request to the engine

    report = api.rewind(run_id, node=node, auto=auto, dry_run=dry_run, store=store,
                        restore_scope=restore_scope.value if restore_scope is not None else None, file=file,
                        on_detected=None if json_out else _print_detected)
    if json_out:
        echo_json(dict(report.detail))
    else:
        ref, where = _name(store, report.run_id), store_args(store)
        print_result(dict(report.detail), command("resume", "--run-id", ref, *where), undo_command(ref, *where))


def register(app: typer.Typer) -> None:
    app.command("rewind", help=HELP,
                short_help="Back a parked run up to an earlier node; restore the files it produced.")(rewind_cmd)


def _name(store: Store, run_id: str) -> str:
    """How hints name the run: its friendly name (unique in the store), else its id."""
    try:
        return store.load_run(run_id).name or run_id
    except StoreError:
        return run_id


def _undo(run_id: str, store_dir: Path | None, json_out: bool) -> None:
    from iterion import api

    store = open_store(store_dir, write=True)
    check_run_writable(store, run_id)
    report = api.undo_rewind(run_id, store=store)
    if json_out:
        echo_json(dict(report.detail))
    else:
        ref = _name(store, report.run_id)
        print_undo(dict(report.detail), command("resume", "--run-id", ref, *store_args(store)))
