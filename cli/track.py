"""`iterion track`: the in-place workspace tracker by hand (capture, list, diff, scope, restore)."""

from __future__ import annotations

import difflib
from pathlib import Path

import typer

from cli.errors import CliError
from cli.output import echo, echo_json
from cli.runref import resolve_loose
from gitrefs.boundary import BoundaryLabel
from workspacetrack import DEFAULT_SIZE_CAP, Scope, Tracker
from workspacetrack.bigfiles import SIZE_CAP_ENV
from workspacetrack.models import EMPTY_DIR
from workspacetrack.names import display

track_app = typer.Typer(
    name="track",
    help="Version an in-place run's workspace outside it (content-hashed snapshots).\n\n"
         "Example: iterion track capture --store ~/.iterion/track --workspace . --run-id r1 --label nodes:build:0",
    no_args_is_help=True,
)

StoreOpt = typer.Option(..., "--store", help="Store directory (outside the workspace).")
WorkspaceOpt = typer.Option(Path("."), "--workspace", help="The workspace the run executes in.")
RunOpt = typer.Option(..., "--run-id", help="The run whose chain to use (id, unique prefix of 4+ characters, or name).")
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")
UndoPathsOpt = typer.Option([], "--path", metavar="PATH", help="Undo only this path of it (repeatable; default: all).")


def _label(text: str) -> BoundaryLabel:
    try:
        return BoundaryLabel.parse(text)
    except ValueError as exc:
        raise CliError(str(exc), hint="labels look like nodes:<node>:<iteration>, e.g. pre:build:0") from None


def _tracker(store: Path, workspace: Path, run_id: str, size_cap: int | None = None, *,
             touches_workspace: bool = False) -> Tracker:
    if touches_workspace and not workspace.is_dir():  # a typo must not capture "nothing" or restore into it
        what = "does not exist" if not workspace.exists() else "is not a directory"
        raise CliError(f"--workspace {workspace} {what}", hint="pass the directory the run executes in")
    return Tracker(store, workspace, resolve_loose(run_id, cwd=workspace, track_store=store), size_cap=size_cap)


def _emit(data: object) -> None:
    echo_json(data, sort_keys=True)


@track_app.command("capture")
def capture(
    label: str = typer.Option(..., "--label", help="Boundary label kind:node:iteration (pre aliases the head)."),
    store: Path = StoreOpt, workspace: Path = WorkspaceOpt, run_id: str = RunOpt,
    size_cap: int = typer.Option(None, "--size-cap", help="Files larger than this many bytes are skipped "
                                 f"(default: ${SIZE_CAP_ENV}, else {DEFAULT_SIZE_CAP} = 2 GiB)."),
    as_json: bool = JsonOpt,
) -> None:
    """Record the workspace as a boundary of the run.

    Example: iterion track capture --store /var/iterion/track --workspace . --run-id r1 --label nodes:build:0
    """
    tracker = _tracker(store, workspace, run_id, size_cap, touches_workspace=True)
    rec = tracker.capture(_label(label))
    stats = tracker.last_capture
    if as_json:
        _emit({"snapshot": rec.id, "labels": rec.labels, "manifest": rec.manifest,
               "mode": stats.mode if stats else None, "hashed": stats.hashed if stats else 0})
    else:
        echo(f"{rec.id[:12]} {label} ({stats.mode if stats else '?'}, {stats.hashed if stats else 0} hashed)")


@track_app.command("list")
def list_(store: Path = StoreOpt, workspace: Path = WorkspaceOpt, run_id: str = RunOpt, as_json: bool = JsonOpt) -> None:
    """List the run's chain (oldest first) and its banks.

    Example: iterion track list --store /var/iterion/track --run-id r1
    """
    tracker = _tracker(store, workspace, run_id)
    snaps, banks = tracker.snapshots(), tracker.banks()
    if as_json:
        _emit({"snapshots": [s.model_dump() for s in snaps], "banks": [b.model_dump() for b in banks]})
        return
    for s in snaps:
        echo(f"{s.id[:12]}  {s.created_at}  {', '.join(s.labels)}")
    for b in banks:
        echo(f"{b.id[:12]}  {b.created_at}  bank {', '.join(b.labels)} ({len(b.touched)} path(s))")
    if not snaps and not banks:
        echo("no snapshots recorded for this run")


@track_app.command("diff")
def diff(
    a: str = typer.Argument(..., help="Snapshot id, id prefix or label."),
    b: str = typer.Argument(..., help="Snapshot id, id prefix or label."),
    patch: bool = typer.Option(False, "--patch", help="Show a text diff of modified files."),
    store: Path = StoreOpt, workspace: Path = WorkspaceOpt, run_id: str = RunOpt, as_json: bool = JsonOpt,
) -> None:
    """Show what changed between two snapshots.

    Example: iterion track diff pre:build:0 nodes:build:0 --store /var/iterion/track --run-id r1 --patch
    """
    tracker = _tracker(store, workspace, run_id)
    changes = tracker.changes(a, b)
    if as_json:
        _emit([c.to_json() for c in changes])
        return
    for c in changes:
        echo(f"{c.kind:12} {display(c.path)}")
        if patch and c.kind != "mode_changed":
            old = tracker.read_object(c.old_hash) if c.old_hash and c.old_hash != EMPTY_DIR else b""
            new = tracker.read_object(c.new_hash) if c.new_hash and c.new_hash != EMPTY_DIR else b""
            lines = difflib.unified_diff(old.decode(errors="replace").splitlines(),
                                         new.decode(errors="replace").splitlines(),
                                         f"a/{display(c.path)}", f"b/{display(c.path)}", lineterm="")
            for line in lines:
                echo(line)
    if not changes:
        echo("no changes")


@track_app.command("scope")
def scope(
    pivot: str = typer.Option(..., "--pivot", help="Pivot boundary, e.g. pre:build:0."),
    store: Path = StoreOpt, workspace: Path = WorkspaceOpt, run_id: str = RunOpt, as_json: bool = JsonOpt,
) -> None:
    """Paths the run is recorded to have changed from the pivot on (the produced scope).

    Example: iterion track scope --pivot pre:build:0 --store /var/iterion/track --run-id r1
    """
    sc = _tracker(store, workspace, run_id).produced_scope(_label(pivot))
    if as_json:
        _emit({"pivot": str(sc.pivot), "paths": sorted(sc.paths), "idle_paths": sorted(sc.idle_paths)})
        return
    if sc.empty:
        echo(f"empty: the run recorded no change after {pivot}")
    for p in sorted(sc.paths):
        echo(display(p))


@track_app.command("restore")
def restore(
    pivot: str = typer.Option(..., "--pivot", help="Pivot boundary, e.g. pre:build:0."),
    restore_scope: Scope = typer.Option(Scope.PRODUCED, "--scope", help="produced, full or none."),
    protect: list[str] = typer.Option([], "--protect", help="A path never written (repeatable), e.g. the .bot source."),
    store: Path = StoreOpt, workspace: Path = WorkspaceOpt, run_id: str = RunOpt, as_json: bool = JsonOpt,
) -> None:
    """Put the workspace back to the pivot for the chosen scope (the current state is banked first).

    Example: iterion track restore --pivot pre:build:0 --scope produced --protect main.bot --store /var/iterion/track --run-id r1
    """
    report = _tracker(store, workspace, run_id, touches_workspace=True).restore(_label(pivot), restore_scope, protect)
    if as_json:
        _emit(report.to_json())
        return
    echo(report.message)
    for title, items in (("restored", report.restored), ("removed", report.removed),
                         ("overwritten", report.overwritten), ("left in place", report.left_in_place)):
        for p in items:
            echo(f"  {title}: {display(p)}")
    for s in report.skipped:
        echo(f"  skipped ({s['reason']}): {display(s['path'])}")
    if report.bank:
        echo(f"bank: {report.bank[:12]} (undo with: iterion track undo --bank {report.bank[:12]})")


@track_app.command("undo")
def undo(
    bank: str = typer.Option(..., "--bank", help="Bank snapshot id (or prefix) a restore printed."),
    path: list[str] = UndoPathsOpt,
    store: Path = StoreOpt, workspace: Path = WorkspaceOpt, run_id: str = RunOpt, as_json: bool = JsonOpt,
) -> None:
    """Undo a restore: put back what it changed, as the bank recorded it.

    Example: iterion track undo --bank 5c90ce238748 --store /var/iterion/track --run-id r1 --path notes.md
    """
    report = _tracker(store, workspace, run_id, touches_workspace=True).undo(bank, paths=path or None)
    if as_json:
        _emit(report.to_json())
    else:
        echo(report.message)


def register(app: typer.Typer) -> None:
    app.add_typer(track_app, name="track")
