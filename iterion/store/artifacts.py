"""Published artifacts: ``artifacts/<name>/<version>.json``, versions 1, 2, ... per run.

Versions only ever grow: a re-execution after a rewind appends a new version and superseded
ones stay readable. Invalidation is logical (the checkpoint's tombstone list), never a delete.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from gitrefs.ids import validate_id
from gitrefs.persist import VersionedModel, file_lock, read_model, write_model
from iterion.store.errors import StoreError
from iterion.store.timeutil import utcnow

ARTIFACTS_DIR = "artifacts"


class ArtifactDoc(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    version: int
    node: str | None = None
    iteration: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    value: Any = None


class ArtifactNotFoundError(StoreError):
    pass


class ArtifactStore:
    def __init__(self, run_dir: Path) -> None:
        self.root = Path(run_dir) / ARTIFACTS_DIR

    def _dir(self, name: str) -> Path:
        return self.root / validate_id(name, "artifact name")

    def versions(self, name: str) -> list[int]:
        d = self._dir(name)
        if not d.is_dir():
            return []
        return sorted(int(p.stem) for p in d.glob("*.json") if p.stem.isdigit())

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def publish(self, name: str, value: Any, *, node: str | None = None, iteration: int | None = None) -> ArtifactDoc:
        """Write the next version of ``name`` (max on disk + 1, so it never reuses a number)."""
        with file_lock(self.root / ".publish.lock"):
            existing = self.versions(name)
            doc = ArtifactDoc(name=name, version=(existing[-1] + 1 if existing else 1), node=node,
                              iteration=iteration, value=value)
            write_model(self._dir(name) / f"{doc.version}.json", doc)
        return doc

    def read(self, name: str, version: int) -> ArtifactDoc:
        path = self._dir(name) / f"{version}.json"
        if not path.is_file():
            raise ArtifactNotFoundError(f"artifact {name} has no version {version}")
        return read_model(path, ArtifactDoc)

    def latest(self, name: str, *, exclude: Collection[int] = ()) -> ArtifactDoc | None:
        """The newest version not in ``exclude`` (pass the checkpoint's tombstones), or None."""
        for v in reversed(self.versions(name)):
            if v not in exclude:
                return self.read(name, v)
        return None
