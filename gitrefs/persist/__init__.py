"""Durable-write primitives shared by every layer: atomic files and versioned documents.

This is the lowest layer of the distribution; it imports nothing of ours.

Names are imported on first use (PEP 562), so ``from gitrefs.persist import UserError`` does not pay
for pydantic: the CLI's start-up (``iterion --version``) stays light (issue 14, point 10).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitrefs.persist.lazyexports import lazy_exports

if TYPE_CHECKING:
    from gitrefs.persist.atomic import atomic_write_bytes, atomic_write_text, fsync_dir, sync_paths
    from gitrefs.persist.errors import UserError
    from gitrefs.persist.filelock import file_lock
    from gitrefs.persist.model import FormatVersionError, VersionedModel, read_model, write_model

_HOME = {
    "atomic_write_bytes": "gitrefs.persist.atomic",
    "atomic_write_text": "gitrefs.persist.atomic",
    "fsync_dir": "gitrefs.persist.atomic",
    "sync_paths": "gitrefs.persist.atomic",
    "UserError": "gitrefs.persist.errors",
    "file_lock": "gitrefs.persist.filelock",
    "FormatVersionError": "gitrefs.persist.model",
    "VersionedModel": "gitrefs.persist.model",
    "read_model": "gitrefs.persist.model",
    "write_model": "gitrefs.persist.model",
}

__all__ = [
    "FormatVersionError",
    "UserError",
    "VersionedModel",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_lock",
    "fsync_dir",
    "read_model",
    "sync_paths",
    "write_model",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())
