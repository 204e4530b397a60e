"""Attachments (``attachments/``): files staged into the run (launch inputs, `key=@./file` answers).

The file is copied into ``files/`` beside a record ``<name>.json`` holding {name, path, mime, size, sha256};
templates read ``{{attachments.NAME}}`` / ``.path`` / ``.mime`` / ``.size`` / ``.sha256`` from it.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import secrets
from datetime import datetime
from pathlib import Path

from pydantic import ConfigDict, Field

from gitrefs.ids import validate_id
from gitrefs.persist import VersionedModel, fsync_dir, read_model, write_model
from iterion.store.errors import StoreError
from iterion.store.timeutil import utcnow

ATTACHMENTS_DIR = "attachments"


class AttachmentRecord(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    path: str  # absolute path of the staged copy
    original_name: str
    mime: str
    size: int
    sha256: str
    staged_at: datetime = Field(default_factory=utcnow)


class AttachmentStore:
    def __init__(self, run_dir: Path) -> None:
        self.root = Path(run_dir) / ATTACHMENTS_DIR

    def stage(self, name: str, source: Path, *, mime: str | None = None) -> AttachmentRecord:
        """Copy ``source`` in as attachment ``name`` (replacing a previous one of that name)."""
        validate_id(name, "attachment name")
        source = Path(source)
        if not source.is_file():
            raise StoreError(f"attachment {name}: {source} is not a readable file",
                             hint="give the path of an existing file (relative to the current directory)")
        files = self.root / "files"  # copies apart from the records: a staged .json is not a record
        files.mkdir(parents=True, exist_ok=True)
        dest = files / f"{name}{source.suffix}"
        tmp = files / f".{name}.{secrets.token_hex(4)}.tmp"
        digest = hashlib.sha256()
        size = 0
        try:
            with source.open("rb") as src, tmp.open("wb") as out:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(files)
        guessed = mime or mimetypes.guess_type(source.name)[0] or "application/octet-stream"
        record = AttachmentRecord(name=name, path=str(dest.resolve()), original_name=source.name, mime=guessed,
                                  size=size, sha256=digest.hexdigest())
        write_model(self.root / f"{name}.json", record)
        return record

    def get(self, name: str) -> AttachmentRecord | None:
        path = self.root / f"{validate_id(name, 'attachment name')}.json"
        return read_model(path, AttachmentRecord) if path.is_file() else None

    def list(self) -> list[AttachmentRecord]:
        if not self.root.is_dir():
            return []
        return [read_model(p, AttachmentRecord) for p in sorted(self.root.glob("*.json"))]
