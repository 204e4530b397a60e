"""`iterion gc`: free what only finished (or deleted) runs reference; iterion/store/gc.py decides.

Exit status: 0 done (or nothing to do), 2 bad input or a store gc cannot read safely (nothing
deleted then).
"""

from __future__ import annotations

from pathlib import Path

import typer

from cli.output import echo, echo_json

STORE_DIR = typer.Option(None, "--store-dir",
                         help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a "
                              "git repository, else <project>/.iterion). Example: --store-dir /var/tmp/iterion-store")


def gc_cmd(
    keep_last: int = typer.Option(0, "--keep-last", min=0,
                                  help="Keep the N most recently finished runs' versions. Example: --keep-last 5"),
    older_than: str | None = typer.Option(None, "--older-than",
                                          help="Only collect runs finished longer ago than this (s, m, h, d, w). "
                                               "Example: --older-than 7d"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be freed; delete nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON. Example: --json"),
    store_dir: Path | None = STORE_DIR,
) -> None:
    """Delete the snapshots, objects, worktrees and refs that only finished or deleted runs need.

    Parked (paused_*), failed_resumable, cancelled, failed, running and queued runs keep
    everything: a later resume or rewind of them restores byte-identical. The worktrees they
    keep are listed with their size (a finished run's worktree is removed when it finishes). A collected run's
    document, events and artifacts stay (`iterion inspect` still shows it). Runs under the
    store's lock, so it is safe while other runs execute.

    Examples: iterion gc --dry-run; iterion gc --keep-last 3 --older-than 14d --json
    """
    from iterion.store import Store
    from iterion.store.gc import collect, parse_duration
    from iterion.store.location import check_store_writable
    from workspacetrack.bigfiles import human_size

    age = parse_duration(older_than) if older_than is not None else None
    store = Store.open(store_dir, Path.cwd())
    if not dry_run and store.runs_dir.is_dir():
        check_store_writable(store.root, store.runs_dir)
    report = collect(store, keep_last=keep_last, older_than=age, dry_run=dry_run)
    if as_json:
        echo_json({"store": str(store.root), **report.to_json()})
        return
    # only what was removed (or would be): a zero part, a run that freed nothing, the kept runs
    # are not reported as if gc had done something to them
    verb = "would free" if dry_run else "freed"
    removed = [r for r in report.collected if r.snapshot_bytes + r.worktree_bytes or r.refs]
    for run in removed:
        parts = [human_size(run.snapshot_bytes + run.worktree_bytes)] if run.snapshot_bytes + run.worktree_bytes else []
        parts += [_count(len(run.refs), "ref")] if run.refs else []
        echo(f"{'would collect' if dry_run else 'collected'} run {run.run_id} ({run.name}): {', '.join(parts)}")
    # issue 30: the worktrees gc keeps (failed, parked runs) are named, so their size is visible
    for kept in report.kept_worktrees:
        echo(f"kept worktree of run {kept.run_id} ({kept.name}, {kept.status}): {human_size(kept.bytes)} at {kept.path}")
    for warning in report.warnings:
        echo(f"warning: {warning}")
    if not report.freed_bytes and not removed:
        echo(f"gc: nothing to free ({_count(report.kept_runs, 'run')} kept)")
        return
    what = [_count(len(removed), "run")] if removed else []
    what += [_count(report.objects_removed, "object")] if report.objects_removed else []
    echo(f"gc: {verb} {human_size(report.freed_bytes)} ({report.freed_bytes} bytes): {', '.join(what)}")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def register(app: typer.Typer) -> None:
    app.command("gc")(gc_cmd)
