"""Where the store lives and the file names inside one run's directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STORE_DIR_NAME = ".iterion"
STORE_ENV = "ITERION_STORE_DIR"


def project_root(cwd: Path) -> Path:
    """The nearest ancestor holding a store (``.iterion/``), else a git repository, else ``cwd``."""
    cwd = Path(cwd).resolve()
    for marker in (STORE_DIR_NAME, ".git"):
        for d in (cwd, *cwd.parents):
            if (d / marker).exists():
                return d
    return cwd


def resolve_store_dir(explicit: Path | None, cwd: Path) -> Path:
    """The store directory: ``explicit``, else $ITERION_STORE_DIR, else ``<project root>/.iterion``.

    Relative paths are taken against ``cwd``.
    """
    if explicit is not None:
        chosen = Path(explicit)
    elif os.environ.get(STORE_ENV):
        chosen = Path(os.environ[STORE_ENV])
    else:
        return project_root(cwd) / STORE_DIR_NAME
    return chosen if chosen.is_absolute() else (Path(cwd) / chosen).resolve()


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
