"""Durable-write primitives shared by every layer: atomic files and versioned documents.

This is the lowest layer of the distribution; it imports nothing of ours.
"""

from persist.atomic import atomic_write_bytes, atomic_write_text, fsync_dir, sync_paths
from persist.errors import UserError
from persist.filelock import file_lock
from persist.model import FormatVersionError, VersionedModel, read_model, write_model

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
