"""The run-store options `run`, `resume` and `inspect` share, and how they open the store.

Kept apart from cli/run.py so `iterion inspect` loads neither the engine's option types nor the
budget model to list runs (issue 14, point 10).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cli.control import sweep_orphans
from cli.preflight import NATS_HELP, open_store

if TYPE_CHECKING:
    from iterion.store import Store

STORE_DIR = typer.Option(None, "--store-dir", help="Run store directory (default: $ITERION_STORE_DIR, else .git/iterion/store in a git repository, else a marked .iterion/ in the project or a parent below $HOME, else <project>/.iterion).")
NATS = typer.Option(None, "--nats", metavar="URL", help=NATS_HELP)


def open_swept(store_dir: Path | None, skip: str | None = None, *, write: bool = False,
               nats: str | None = None) -> Store:
    # a read-only store is refused before the sweep; stale `running` runs promoted first
    return sweep_orphans(open_store(store_dir, write=write, nats=nats), skip)
