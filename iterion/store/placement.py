"""Where a run store may live relative to the workspace a run writes to.

The store holds everything needed to resume and rewind (history, checkpoints, snapshots,
banks). A store inside the working tree that nothing ignores is one ``git clean -fdx`` (or one
``git add -A``) away from being deleted or versioned, so it is refused - unless the user's OWN
ignore rules already exclude it. iterion never writes ignore rules into a user's directory to
make it pass; the only ``.gitignore`` it writes is inside a ``.iterion/`` store directory it
creates itself outside any git repository (its own directory, so the workspace tracker skips it).

Invariant: a run is only ever created in (or resumed from) a store that is outside the working
tree, inside the repository's git directory, or excluded by ignore rules the user wrote.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from iterion.store.errors import StoreError
from iterion.store.layout import PROJECT, git_dirs

OWN_GITIGNORE = "# iterion's run store (created outside any git repository): never part of a snapshot\n*\n"


class StorePlacementError(StoreError):
    """A store inside the working tree that no ignore rule of the user's excludes."""


def _ignored_by_git(top: Path, probe: Path) -> bool:
    proc = subprocess.run(["git", "check-ignore", "-q", "--no-index", str(probe)], check=False, cwd=top,
                          capture_output=True, text=True)
    return proc.returncode == 0


def _ignored_outside_git(tree: Path, probe: Path) -> bool:
    from workspacetrack.ignore import IgnoreRules

    return IgnoreRules(tree).ignores(probe.relative_to(tree).as_posix())


def check_store_placement(root: Path, origin: str, workspace: Path) -> None:
    """Refuse (exit 2) a store inside ``workspace``'s working tree unless the user ignores it.

    The working tree is the git top level holding ``workspace`` (a worktree run's repository
    included), else ``workspace`` itself. A store under the repository's git directory is never
    inside it.
    """
    store = Path(root).resolve()
    ws = Path(workspace).resolve()
    if ws == store or ws.is_relative_to(store):
        # a run there would version (and a rewind restore) the store's own files
        where = "is the run store itself" if ws == store else f"is inside the run store {store}"
        raise StorePlacementError(f"the workspace {ws} {where}: a run would version its own history",
                                  hint="pass --workspace a project directory outside the run store, or put the "
                                       "store elsewhere (--store-dir/$ITERION_STORE_DIR)")
    repo = git_dirs(ws) if ws.is_dir() else None
    tree = repo[0] if repo else ws
    if repo is not None and store.is_relative_to(repo[1]):
        return  # <git dir>/iterion: never versioned, never cleaned
    if not (store == tree or store.is_relative_to(tree)):
        return
    probe = store / "runs"
    if store != tree:
        if repo is not None and _ignored_by_git(tree, probe):
            return
        if repo is None and (origin == PROJECT or _ignored_outside_git(tree, probe)):
            return
    rel = store.relative_to(tree).as_posix()
    if repo is None:  # no git here: the workspace tracker's own ignore rules are what counts
        raise StorePlacementError(
            f"the run store {store} is inside the workspace {tree} and nothing ignores it (every capture would "
            f"version it): drop --store-dir/$ITERION_STORE_DIR to use the default store (.iterion/ of the project), "
            f"choose a directory outside {tree}, or ignore it yourself (e.g. add '/{rel}/' to {tree / '.iterionignore'})")
    raise StorePlacementError(
        f"the run store {store} is inside the working tree {tree} and nothing ignores it "
        f"(`git clean -fdx` would delete it): drop --store-dir/$ITERION_STORE_DIR to use the default "
        f"store in the repository's git directory, choose a directory outside {tree}, or ignore it "
        f"yourself (e.g. add '/{rel}/' to .git/info/exclude)")


def prepare_store(root: Path, origin: str, workspace: Path) -> None:
    """Check the placement, then create the store directory.

    Only a ``.iterion/`` store iterion creates itself outside any repository gets a ``*``
    .gitignore (its own directory: the workspace tracker and any later ``git init`` skip it).
    """
    check_store_placement(root, origin, workspace)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if origin == PROJECT and not (root / ".gitignore").exists():
        (root / ".gitignore").write_text(OWN_GITIGNORE)
