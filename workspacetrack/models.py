"""The tracker's persisted formats (versioned pydantic documents).

Manifests and stat caches hold one row per file; rows are plain tuples rather than nested
models so that loading a 20,000-file manifest is one pass of pydantic's core, not 20,000 model
constructions.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from persist import VersionedModel

# One captured path: (content id of the file or of the link target, st_mode, size, symlink
# target). The id is a blake3 (64 hex) or a git blob id (40 hex): ``Manifest.ids`` says which.
Entry = tuple[str, int, int, str | None]
# What the stat cache compares: (size, mtime_ns, ctime_ns, inode, st_mode).
StatKey = tuple[int, int, int, int, int]
# A stat-cache row: (key, hash or "!<skip reason>", trusted, symlink target). Untrusted rows are "racily clean":
# written within the timestamp window of their capture, so their stat cannot vouch for content.
CacheRow = tuple[StatKey, str, bool, str | None]

SKIP_OVERSIZED = "oversized"
SKIP_SPECIAL = "special_file"
SKIP_UNENCODABLE = "unencodable_name"
SKIP_UNREADABLE = "unreadable"
# The "content id" of an empty directory's entry (st_mode S_IFDIR): recorded so a restore can
# recreate a directory a node removed. Not an object id (never stored, never read).
EMPTY_DIR = "dir"


class Manifest(VersionedModel):
    """Every captured path of one workspace state, plus the paths seen but not captured.

    A journal-driven capture stores a DELTA instead (``base`` set): the paths whose entry or
    skip reason changed against the base manifest, and the paths ``removed`` from it, so its
    cost follows the number of changes, not the size of the tree. ``depth`` bounds the chain
    of deltas a reader applies; ``TrackStore.read_manifest`` always returns the full state.

    Version 2 added ``ids``: the kind of content id every entry holds, "blake3" (version 1
    manifests, workspaces outside git) or "git" (git blob ids, ``workspacetrack.gitsource``).
    One run keeps one kind from its first capture on, so equal content always has equal ids
    within a run and diffs compare ids alone.
    """

    FORMAT_VERSION = 2
    entries: dict[str, Entry] = Field(default_factory=dict)
    skipped: dict[str, str] = Field(default_factory=dict)  # path -> reason
    base: str | None = None
    removed: list[str] = Field(default_factory=list)
    depth: int = 0
    ids: Literal["blake3", "git"] = "blake3"


class SnapshotRecord(VersionedModel):
    """One recorded state: a chain boundary, or a bank taken before a restore writes anything."""

    FORMAT_VERSION = 1
    id: str
    run_id: str
    kind: Literal["boundary", "bank"] = "boundary"
    parent: str | None = None
    labels: list[str] = Field(default_factory=list)
    created_at: str
    manifest: str
    capture_mode: str = "full"
    # banks only: the paths the restore that took this bank went on to change (what undo puts back)
    touched: list[str] = Field(default_factory=list)


class ChainLink(VersionedModel):
    label: str
    snapshot: str


class RunState(VersionedModel):
    """A run's snapshots, chain, label map and banks: the one document a capture commits.

    Snapshot records live here rather than in files of their own so that a capture costs one
    durable write (state.json) on top of its objects: the per-capture fsyncs dominate an
    unchanged capture.
    """

    FORMAT_VERSION = 1
    run_id: str
    workspace: str
    head: str | None = None
    chain: list[ChainLink] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)  # label -> snapshot id (latest occurrence)
    banks: list[str] = Field(default_factory=list)
    snapshots: dict[str, SnapshotRecord] = Field(default_factory=dict)
    # object id of the ignore-rule texts in force for this run (those at its first capture,
    # JSON {path: text} in wire form); None: a run recorded before rules were frozen (live rules)
    ignore_rules: str | None = None


class StatCacheDoc(VersionedModel):
    """path -> stat key -> hash, and the manifest whose path set the rows describe exactly."""

    FORMAT_VERSION = 2
    manifest: str | None = None
    ids: Literal["blake3", "git"] = "blake3"  # the kind of the rows' hashes (version 1: blake3)
    size_cap: int = 0  # rows record "oversized" verdicts: valid only under the same cap
    rows: dict[str, CacheRow] = Field(default_factory=dict)
