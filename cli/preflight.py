"""Checks a command makes before it changes anything: the environment it needs is usable.

Every refusal here is one ``error:`` line naming the path and the fix (exit 2), raised before a
run document, a lock, an event or a workspace file is written, so the store and the workspace
are left exactly as they were. The store's own shape (a file, a device, a path under a file) is
checked by ``Store.open``; this module adds what only a writing command needs.
"""

from __future__ import annotations

from pathlib import Path

from cli.errors import CliError
from gitrefs.persist.writable import unwritable_reason
from iterion.store import Store
from iterion.store.location import check_store_space, check_store_writable
from iterion.store.lock import check_lock_path, lock_path
from iterion.store.reserve import reserve_size

WRITABLE_HINT = "remount it read-write or fix its permissions, then retry"


NATS_HELP = ("Keep run documents, checkpoints and events in NATS JetStream at URL (beats $ITERION_NATS_URL; "
             "'off': the filesystem store). The store directory then holds only this machine's part. "
             "Example: --nats nats://127.0.0.1:4222")


def open_store(store_dir: Path | None, *, write: bool, nats: str | None = None) -> Store:
    """The command's store (``iterion.store.opener``: --nats, else $ITERION_NATS_URL, else files);
    ``write``: refuse a read-only one before anything is written."""
    from iterion.command_store import open_command_store  # the one home, shared with iterion.api

    return open_command_store(store_dir, write=write, nats=nats, cwd=Path.cwd())


def check_backend(backend: str | None) -> None:
    if backend is None:
        return
    from iterion.backends.base import BackendError  # the backends import the IR: only when --backend is given
    from iterion.backends.registry import canonical_name

    try:
        canonical_name(backend)
    except BackendError as exc:
        raise CliError(f"--backend: {exc.message}", hint="pick one of the known backends, or drop --backend") from None


def check_model(model: str | None) -> str | None:
    """``--model`` as given, refused (exit 2) when it cannot be a model name."""
    from iterion.backends.choice import check_model_override

    try:
        return check_model_override(model)
    except ValueError as exc:
        raise CliError(f"--model: {exc}", hint="drop --model to keep the workflow's models") from None


def check_script(script: Path | None) -> None:
    if script is None:
        return
    if not script.exists():
        raise CliError(f"--script {script}: no such file", hint="give the path of the script backend's answers file")
    if not script.is_file():
        raise CliError(f"--script {script} is not a regular file",
                       hint="give the path of the script backend's answers file")


def check_workspace(workspace: Path, what: str = "workspace") -> Path:
    """An existing, writable directory that is not the filesystem root (never created here)."""
    resolved = workspace.resolve()
    if resolved == Path(resolved.anchor):
        raise CliError(f"{what} {resolved} is the filesystem root: a run there would version and write the whole "
                       "system", hint="pass --workspace a project directory")
    if not resolved.exists():
        raise CliError(f"{what} {resolved} does not exist",
                       hint=f"create it first (mkdir -p {resolved}) or pass --workspace an existing directory")
    if not resolved.is_dir():
        raise CliError(f"{what} {resolved} is not a directory", hint="pass --workspace a directory")
    reason = unwritable_reason(resolved)
    if reason is not None:
        raise CliError(f"{what} {resolved} cannot be written: {reason}", hint=WRITABLE_HINT)
    return resolved


def check_launch(workspace: Path | None, backend: str | None, script: Path | None) -> None:
    """`iterion run`: everything checked before the store is opened or a run document exists."""
    check_backend(backend)
    check_script(script)
    check_workspace(workspace if workspace is not None else Path.cwd())


def check_run_writable(store: Store, run_ref: str, *, workspace: bool = True) -> str:
    """resume/rewind/cancel of an existing run: its store files (and, with ``workspace``, the run's
    workspace) can be written. Returns the resolved run id."""
    run_id = store.resolve_run(run_ref)
    run_dir = store.run_dir(run_id)
    check_store_writable(store.root, store.runs_dir, run_dir)
    check_lock_path(lock_path(run_dir))
    check_store_space(run_dir, reserve_size(store.paths(run_id).run_json))
    if workspace:
        doc = store.load_run(run_id)
        if doc.workspace_dir:
            where = Path(doc.workspace_dir)
            reason = unwritable_reason(where) if where.is_dir() else None  # a vanished one: resume says so
            if reason is not None:
                raise CliError(f"workspace {where} of run {run_id} cannot be written: {reason}", hint=WRITABLE_HINT)
    return run_id


def check_backends_usable(workflow: object, source: Path, backend: str | None, script: Path | None) -> None:
    """`iterion run`: every LLM node's backend (as the run would resolve it) is usable on this
    machine (credentials, CLI), else refused (exit 2) before the run is created: a run that could
    only fail at its first LLM node is not started. (`resume` re-checks nothing here: a parked
    run's node fails BACKEND_UNAVAILABLE, resumable once fixed.)"""
    import os

    from iterion.backends.script import find_script_file
    from iterion.backends.usable import unusable_nodes

    script_file = str(script.resolve()) if script else find_script_file(source)
    bad = unusable_nodes(workflow, os.environ, override=backend, script_file=script_file)
    if bad:
        more = f" (and {len(bad) - 1} more node(s))" if len(bad) > 1 else ""
        raise CliError(f"cannot start: {bad[0].message()}{more}; no run was created",
                       hint="configure it (`iterion backends` says what each needs), or pick another with --backend")
