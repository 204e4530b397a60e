"""The tracker's persisted formats (versioned pydantic documents).

Manifests and stat caches hold one row per file; rows are plain tuples rather than nested
models so that loading a 20,000-file manifest is one pass of pydantic's core, not 20,000 model
constructions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from gitrefs.persist import VersionedModel

# One captured path: (content id of the file or of the link target, st_mode, size, symlink
# target). The id is a blake3 (64 hex) or a git blob id (40 hex): ``Manifest.ids`` says which.
Entry = tuple[str, int, int, str | None]
# What the stat cache compares: (size, mtime_ns, ctime_ns, inode, st_mode).
StatKey = tuple[int, int, int, int, int]
# A stat-cache row: (key, hash or "!<skip reason>", trusted, symlink target). Untrusted rows are "racily clean":
# written within the timestamp window of their capture, so their stat cannot vouch for content.
CacheRow = tuple[StatKey, str, bool, str | None]



class SkipReason(StrEnum):
    """Why a path was not captured or not restored: the one vocabulary of skip codes.

    Capture codes are persisted (``Manifest.skipped``, stat-cache rows ``"!<code>"``); restore
    codes are reported (``RestoreReport.skipped``, a rewind's ``files.skipped``), where the code
    is the reason's first word (``workspacetrack.reasons.describe`` adds what to do). A StrEnum,
    so a member is its string wherever a persisted document or a JSON report holds it.
    """

    # capture (persisted)
    OVERSIZED = "oversized"              # larger than the capture limit
    SPECIAL = "special_file"             # a fifo, socket or device file
    UNENCODABLE = "unencodable_name"     # a name no manifest can hold (kept: older manifests may name it)
    UNREADABLE = "unreadable"            # could not be read (or listed) when captured
    # restore (reported)
    IGNORED = "ignored"                  # the ignore rules exclude it (its rule follows in parentheses)
    PROTECTED = "protected"              # a protected path (--protect, a workflow source file)
    SYMLINK_ESCAPE = "symlink_escape"    # the path is, or passes through, a link leaving the workspace
    SYMLINK_IN_PATH = "symlink_in_path"  # passes through a link inside it: writing would alias another path
    BLOCKED = "blocked"                  # a file or non-empty directory the scope does not own is in the way
    GIT_UNRESTORED = "submodule or blocked path"  # a worktree run: git did not restore it (gitrefs.worktree_apply)

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
    # boundaries: the paths whose recorded state differs from the ``parent`` snapshot's (what
    # ``changes.changed_paths`` of the two manifests gives), when the capture knew it cheaply
    # (its journal delta, or a walk with the parent's manifest in memory); None: unknown, diff
    # the manifests. A produced scope is the union of these over its intervals.
    changed: list[str] | None = None


class ChainLink(VersionedModel):
    label: str
    snapshot: str


class RunState(VersionedModel):
    """A run's snapshots, chain, label map and banks.

    Persisted as ``state.json`` (this document, rewritten whole only when created and when the
    log is compacted) plus ``state.log`` (one ``StateLogRecord`` line per commit after it, with
    ``seq`` > ``log_seq``): a capture appends one line rather than rewriting every snapshot the
    run ever recorded (``TrackStore`` has the crash rules). Version 1 had no log (``log_seq`` 0).
    """

    FORMAT_VERSION = 2
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
    # every state.log record with seq <= log_seq is already folded into this document
    log_seq: int = 0

    def apply(self, rec: StateLogRecord) -> None:
        """Fold one committed log record in (the same code for a writer and a reader)."""
        if rec.snapshot is not None:
            self.snapshots[rec.snapshot.id] = rec.snapshot
        if rec.ignore_rules is not None:
            self.ignore_rules = rec.ignore_rules
        if rec.link is not None:
            self.chain.append(rec.link)
            self.labels[rec.link.label] = rec.link.snapshot
        if rec.head is not None:
            self.head = rec.head
        if rec.bank is not None:
            self.banks.append(rec.bank)
        self.log_seq = rec.seq


class StateLogRecord(VersionedModel):
    """One commit after ``state.json``: a snapshot record and what it changes in the run state."""

    FORMAT_VERSION = 1
    seq: int = 0
    snapshot: SnapshotRecord | None = None
    link: ChainLink | None = None   # appended to the chain (and the label map)
    head: str | None = None
    bank: str | None = None         # appended to the banks
    ignore_rules: str | None = None


class StatCacheDoc(VersionedModel):
    """path -> stat key -> hash, and the manifest whose path set the rows describe exactly.

    A git-ids run persists only the rows git's index cannot vouch for: a walk re-derives the
    others from the index (``Capturer._beyond_index``). Persisted as a hard link to a file
    shared by content (``TrackStore.save_cache``)."""

    FORMAT_VERSION = 4
    manifest: str | None = None
    ids: Literal["blake3", "git"] = "blake3"  # the kind of the rows' hashes (version 1: blake3)
    # Version 3: when rows were left out for git's index, the index's checksum (hex of its
    # trailer) that vouched for them and how many rows ``manifest`` has in all; with that very
    # index, a walk whose rows are these plus ``total - len(rows)`` taken from it finds
    # ``manifest`` again. Version 2 documents read with neither (no such reuse).
    index: str | None = None
    total: int = 0
    size_cap: int = 0  # rows record "oversized" verdicts: valid only under the same cap
    rows: dict[str, CacheRow] = Field(default_factory=dict)
    # Version 4, the warm start of a new process (docs/technical/durability.md, "Warm start"):
    # every directory the walks behind ``dirs_manifest`` listed -> the fingerprint of that
    # listing (names and lstat keys), "" where its rows could not vouch for it (a racily clean
    # row, a name without a row, a change the journal reported since). A walk that lists every
    # one of them again with the same fingerprint finds ``dirs_manifest``. Older versions: none.
    dirs: dict[str, str] = Field(default_factory=dict)
    dirs_manifest: str | None = None
