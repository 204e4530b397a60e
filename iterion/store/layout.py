"""Where the store lives and the file names inside one run's directory.

The store is found like git finds its repository (``locate_store``), first match wins:

1. ``--store-dir`` (relative to the current directory), then ``$ITERION_STORE_DIR``;
2. inside a git repository, a store from before the move: the nearest ``.iterion/`` holding
   runs, from the current directory up to the repository's top level;
3. inside a git repository: ``$(git rev-parse --git-common-dir)/iterion/store`` - never
   versioned, never touched by ``git clean``, the same from every subdirectory and every linked
   worktree. (``store/``, not the ``iterion/`` directory itself: gitrefs already keeps its own
   per-run records in ``<git common dir>/iterion/runs/<run>/run.json``, which the store's
   ``runs/<run>/run.json`` would collide with.);
4. outside a repository: a *marked* store (``.iterion/`` holding the marker file
   ``iterion-store``, or runs: a store from before the marker) in the project directory or one
   of its ancestors, the search stopping BEFORE ``$HOME``, the filesystem root and any directory
   of ``$ITERION_STORE_CEILING`` (``:``-separated, like ``GIT_CEILING_DIRECTORIES``); else a new
   store ``.iterion/`` in the project directory itself. An empty ``.iterion/``, one in ``$HOME``
   or ``/.iterion`` never catches a project's runs (docs/user-guide.md, "Where things live").

The project directory is where the command starts (the current directory, for every command
alike: a ``resume`` run from where the ``run`` was finds it). The marker is written with a
store's first run (``Store.create_run``).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

STORE_DIR_NAME = ".iterion"
GIT_STORE_PATH = ("iterion", "store")  # under the repository's common git directory
STORE_ENV = "ITERION_STORE_DIR"
CEILING_ENV = "ITERION_STORE_CEILING"
STORE_MARKER = "iterion-store"  # inside .iterion/: "this directory is a run store"
MARKER_TEXT = "This directory is an iterion run store (runs/). Keep this file: it lets iterion find it.\n"

# how a store was found (``StoreLocation.origin``)
EXPLICIT = "explicit"    # --store-dir
ENV = "env"              # $ITERION_STORE_DIR
LEGACY = "legacy"        # an existing .iterion/ with runs (the pre-move default)
GIT = "git"              # <git common dir>/iterion/store
PROJECT = "project"      # .iterion/ at the project root, outside any repository


@dataclass(frozen=True)
class StoreLocation:
    root: Path
    origin: str

    @property
    def chosen_by_user(self) -> bool:
        return self.origin in (EXPLICIT, ENV)


def git_dirs(cwd: Path) -> tuple[Path, Path] | None:
    """(working-tree top level, common git directory) of the repository holding ``cwd``, or None."""
    try:
        proc = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--show-toplevel",
                               "--git-common-dir"], check=False, cwd=cwd, capture_output=True, text=True)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != 2:
        return None  # not a repository, or a bare one / inside .git (no working tree)
    return Path(lines[0]).resolve(), Path(lines[1]).resolve()


def _has_runs(store: Path) -> bool:
    try:
        return any((store / "runs").iterdir())
    except OSError:
        return False


def _legacy_store(cwd: Path, top: Path) -> Path | None:
    """The nearest ``.iterion/`` holding runs from ``cwd`` up to the repository's ``top`` (inclusive)."""
    for d in (cwd, *cwd.parents):
        if _has_runs(d / STORE_DIR_NAME):
            return d / STORE_DIR_NAME
        if d == top:
            break
    return None


def is_marked(store: Path) -> bool:
    """``store`` is a run store: it holds the marker, or runs (a store from before the marker)."""
    return (store / STORE_MARKER).is_file() or _has_runs(store)


def ceilings(env: dict[str, str] | None = None) -> set[Path]:
    """The directories the search for a store never reaches: ``$HOME``, the filesystem root and
    ``$ITERION_STORE_CEILING``'s (read from the environment, so tests set a fake root)."""
    environ = os.environ if env is None else env
    out = {Path("/")}
    for raw in [environ.get("HOME", ""), *environ.get(CEILING_ENV, "").split(os.pathsep)]:
        if raw and os.path.isabs(raw):
            out.add(Path(os.path.realpath(raw)))
    return out


def project_store(project: Path) -> Path:
    """Outside a repository: the nearest marked ``.iterion/`` from ``project`` up to (excluding)
    a ceiling; else ``project/.iterion`` (a new store beside the project)."""
    project = Path(project).resolve()
    stop = ceilings()
    for d in (project, *project.parents):
        if d != project and d in stop:
            break
        if is_marked(d / STORE_DIR_NAME):
            return d / STORE_DIR_NAME
        if d in stop:  # the project is $HOME itself: its own store, never an ancestor's
            break
    return project / STORE_DIR_NAME


def mark_store(root: Path) -> None:
    """Write the marker (idempotent; a store that cannot take it is still a store: its runs mark it)."""
    marker = Path(root) / STORE_MARKER
    if marker.is_file():
        return
    from gitrefs.persist import atomic_write_bytes

    try:
        atomic_write_bytes(marker, MARKER_TEXT.encode("ascii"))
    except OSError:
        pass


def locate_store(explicit: Path | None, cwd: Path) -> StoreLocation:
    """The store directory and how it was found (see the module doc)."""
    cwd = Path(cwd)
    if explicit is not None or os.environ.get(STORE_ENV):
        origin = EXPLICIT if explicit is not None else ENV
        chosen = Path(explicit if explicit is not None else os.environ[STORE_ENV])
        return StoreLocation(chosen if chosen.is_absolute() else (cwd / chosen).resolve(), origin)
    here = cwd.resolve()
    repo = git_dirs(here)
    if repo is None:
        return StoreLocation(project_store(here), PROJECT)
    legacy = _legacy_store(here, repo[0])
    if legacy is not None:
        return StoreLocation(legacy, LEGACY)
    return StoreLocation(repo[1].joinpath(*GIT_STORE_PATH), GIT)


def resolve_store_dir(explicit: Path | None, cwd: Path) -> Path:
    """The store directory ``locate_store`` picks. Relative paths are taken against ``cwd``."""
    return locate_store(explicit, cwd).root


@dataclass(frozen=True)
class RunPaths:
    """The files of ``runs/<run>/``."""

    dir: Path

    @property
    def run_json(self) -> Path:
        return self.dir / "run.json"

    @property
    def checkpoint_json(self) -> Path:
        return self.dir / "checkpoint.json"

    @property
    def events_jsonl(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def lock(self) -> Path:
        return self.dir / "lock"

    @property
    def cas_lock(self) -> Path:
        # serializes save_run's check+rename; distinct from the execution lock above
        return self.dir / ".run.json.cas"

    @property
    def artifacts(self) -> Path:
        return self.dir / "artifacts"

    @property
    def interactions(self) -> Path:
        return self.dir / "interactions"

    @property
    def attachments(self) -> Path:
        return self.dir / "attachments"

    @property
    def rewind_intent(self) -> Path:
        """A rewind's intent record: present exactly while a rewind is committed and unfinished
        (iterion/rewind/intent.py); resume refuses the run while it exists."""
        return self.dir / "rewind-intent.json"

    @property
    def track(self) -> Path:
        """workspacetrack's data for an in-place run (the engine hands it over)."""
        return self.dir / "track"
