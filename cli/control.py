"""`iterion cancel`, `iterion pause`, `iterion fork`, `iterion reconcile`: operating on runs.

Exit status: 0 done, 1 refused (the message names the run's status and what would work),
2 bad input, 7 requested but not yet effective (the run's process has not picked it up in --wait).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cli.exit_codes import ExitCode
from cli.output import echo, echo_err, echo_json
from cli.preflight import check_run_writable, open_store
from iterion.engine.stale import reconcile_orphans, stale_after_s
from iterion.invocation import command
from iterion.store import Store, StoreError
from iterion.store.layout import LEGACY

if TYPE_CHECKING:  # the engine's operations are imported by the command that runs them
    from iterion.engine.operator_verbs import ControlOutcome

STORE_DIR = typer.Option(None, "--store-dir",
                         help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a "
                              "git repository, else <project>/.iterion). Example: --store-dir /var/tmp/iterion-store")
JSON = typer.Option(False, "--json", help="Print the outcome as JSON. Example: --json")
WAIT = typer.Option(30.0, "--wait", min=0,
                    help="Seconds to wait for the run's process to act on the request (0: just ask). Example: --wait 5")


def _store(store_dir: Path | None) -> Store:
    return open_store(store_dir, write=False)  # $ITERION_NATS_URL applies here as everywhere


def sweep_orphans(store: Store, skip: str | None = None) -> Store:
    """The start-up sweep of commands that open the store (run, resume, inspect, rewind): promote
    stale `running` runs, one stderr line each. Best effort: it never stops the command itself.
    ``skip``: the run `resume` takes over itself (id, prefix or name)."""
    from iterion.command_store import sweep_orphans as sweep  # the one home, shared with iterion.api

    legacy_store_hint(store)
    done = sweep(store, skip)
    if done.error is not None:
        echo_err(f"iterion: warning: orphan sweep skipped: {done.error}")
        return store
    for p in done.promoted:
        at = f" at {p.restart_node}" if p.restart_node else " (no checkpoint)"
        echo_err(f"iterion: run {p.run_id} was orphaned (its process is gone): promoted to {p.status}{at}")
    return store


LEGACY_HINT_MARK = ".location-hint-shown"


def announce_new_store(store: Store, project: Path) -> None:
    """The first run of a project outside any repository says where its new store is made."""
    from iterion.store.layout import PROJECT, is_marked

    if store.origin != PROJECT or is_marked(store.root):
        return
    echo_err(f"iterion: new run store {store.root} (no marked .iterion/ in {project} or a parent below $HOME); "
             f"commands run from {project} or below find it")


def legacy_store_hint(store: Store) -> None:
    """Once per pre-move store (``.iterion/`` holding runs): say where new projects keep theirs."""
    if store.origin != LEGACY or (store.root / LEGACY_HINT_MARK).exists():
        return
    echo_err(f"iterion: using the existing run store {store.root} (found in the project); a project "
             "without one keeps its runs in .git/iterion/store - see README, 'Where things live'")
    try:
        (store.root / LEGACY_HINT_MARK).touch()
    except OSError:
        pass


def _report(outcome: ControlOutcome, as_json: bool, ref: str | None = None) -> None:
    if as_json:
        echo_json(outcome.to_json())
    else:
        where = f" at {outcome.restart_node}" if outcome.restart_node else ""
        line = f"run {outcome.run_id}: {outcome.status}{where}"
        if outcome.message:
            line += f" ({outcome.message})"
        echo(line)
        if outcome.status in ("cancelled", "paused_operator"):
            echo(f"resume with: {command('resume', '--run-id', ref or outcome.run_id)}")
    if outcome.delivered == "pending":
        raise typer.Exit(ExitCode.CONTROL_PENDING)


def _run_name(store: Store, run_id: str) -> str | None:
    """The run's friendly name (unique in its store): what hints print."""
    try:
        return store.load_run(run_id).name or None
    except StoreError:
        return None


def cancel_cmd(
    run_id: str = typer.Option(..., "--run-id", help="The run to cancel (id, unique prefix or name). Example: --run-id 01a2b3"),
    wait: float = WAIT,
    store_dir: Path | None = STORE_DIR,
    as_json: bool = JSON,
) -> None:
    """Cancel a run; it stays resumable from its checkpoint.

    A live run is interrupted at once (a running tool is killed) and its checkpoint
    anchors at the node it was executing; a run no process executes just becomes cancelled.
    A cancelled run resumes from its checkpoint.

    Example: iterion cancel --run-id 01a2b3
    """
    from iterion.engine.operator_verbs import cancel_run

    store = open_store(store_dir, write=True)
    check_run_writable(store, run_id, workspace=False)  # a cancel never touches the workspace
    outcome = cancel_run(store, run_id, wait_s=wait)
    _report(outcome, as_json, _run_name(store, outcome.run_id))


def pause_cmd(
    run_id: str = typer.Option(..., "--run-id", help="The running run to pause (id, unique prefix or name). Example: --run-id 01a2b3"),
    wait: float = WAIT,
    store_dir: Path | None = STORE_DIR,
    as_json: bool = JSON,
) -> None:
    """Pause a running run at its next node boundary.

    The current node finishes first. The run parks paused_operator anchored at the node about to execute; resume it with `iterion resume`.

    Example: iterion pause --run-id 01a2b3 && iterion resume --run-id 01a2b3
    """
    from iterion.engine.operator_verbs import pause_run

    store = _store(store_dir)
    outcome = pause_run(store, run_id, wait_s=wait)
    _report(outcome, as_json, _run_name(store, outcome.run_id))


def fork_cmd(
    run_id: str = typer.Option(..., "--run-id", help="The run to fork (left untouched). Example: --run-id 01a2b3"),
    node: str = typer.Option(..., "--node", help="An LLM node the run executed (agent, judge, llm router). Example: --node draft"),
    iteration: int | None = typer.Option(None, "--iteration", min=0,
                                         help="Which execution of the node (default: its latest). Example: --iteration 0"),
    store_dir: Path | None = STORE_DIR,
    as_json: bool = JSON,
) -> None:
    """Create a new child run from the turn checkpoint recorded before an LLM node executed.

    The child is parked paused_operator at that node; `iterion resume --run-id CHILD` runs the
    alternative future. The original run is not modified (use `iterion rewind` to back up the
    same run instead).

    Example: iterion fork --run-id 01a2b3 --node draft && iterion resume --run-id <child>
    """
    from iterion.engine.fork import fork_run

    result = fork_run(_store(store_dir), run_id, node, iteration=iteration)
    if as_json:
        echo_json(result.to_json())
        return
    echo(f"forked run {result.parent_run_id} at {result.node} (iteration {result.iteration}): "
         f"new run {result.run_id} ({result.name}), {result.status}")
    echo(f"continue it with: {command('resume', '--run-id', result.name or result.run_id)}")


def reconcile_cmd(
    store_dir: Path | None = STORE_DIR,
    as_json: bool = JSON,
) -> None:
    """Promote orphaned runs (running, but their process is gone) to a resumable status.

    A `running` run whose process is gone (no live lock) and whose timeline was not flushed for 60 s becomes failed_resumable (failed without a checkpoint),
    so it is resumed from its checkpoint rather than restarted from the entry.

    Example: iterion reconcile --json
    """
    promoted = reconcile_orphans(_store(store_dir))
    if as_json:
        echo_json([p.to_json() for p in promoted])
        return
    if not promoted:
        echo(f"no orphaned runs (grace window {stale_after_s():g}s)")
    for p in promoted:
        echo(f"run {p.run_id}: promoted to {p.status}" + (f" at {p.restart_node}" if p.restart_node else ""))


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel_cmd)
    app.command("pause")(pause_cmd)
    app.command("fork")(fork_cmd)
    app.command("reconcile")(reconcile_cmd)
