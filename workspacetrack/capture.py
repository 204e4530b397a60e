"""Turning the workspace into a manifest: by full stat walk, or from the journal's changed paths.

Both paths produce the same (entries, skipped, stat rows) triple for the same disk state; the
journal path starts from the previous capture's triple and re-examines only what the journal
names, through the very code (``Scan.rescan``) the walk uses for each path.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workspacetrack.changes import changed_paths
from workspacetrack.ignore import RULE_FILES, IgnoreRules
from workspacetrack.journal import Journal
from workspacetrack.models import CacheRow, Entry, Manifest, StatCacheDoc
from workspacetrack.store import TrackStore
from workspacetrack.walk import DirRecord, Scan, manifest_parts

# Test hook: when set to a file path, a capture creates that file once its objects are written
# and then sleeps, so a test can SIGKILL it between writing objects and committing.
PAUSE_HOOK_ENV = "ITERION_TRACK_TEST_PAUSE_MID_CAPTURE"
# A journal capture stores a delta manifest; past this many stacked deltas it writes a full one.
MAX_DELTA_DEPTH = 8


@dataclass(frozen=True)
class CaptureStats:
    mode: Literal["full", "journal", "alias"]
    hashed: int         # files read and hashed by this capture
    examined: int       # paths stat'ed (the whole tree for a walk, the journal's paths otherwise)
    reused_manifest: bool
    fallback_reason: str | None = None
    seconds: float = 0.0  # the scan phase alone (walk or journal, hashing, manifest), before the commit


class Capturer:
    """Per-tracker capture state: the in-memory stat cache and the journal's baseline."""

    def __init__(self, store: TrackStore, workspace: Path, rules: IgnoreRules, journal: Journal,
                 size_cap: int) -> None:
        self.store = store
        self.ws = str(workspace)
        self.rules = rules
        self.journal = journal
        self.size_cap = size_cap
        self._rows: dict[str, CacheRow] | None = None
        self._rows_manifest: str | None = None
        # (index checksum, rows in all) when ``_rows`` leave out what that index vouched for
        self._rows_index: tuple[str, int] | None = None
        self._rows_dirty = False
        # The last full walk's per-directory records of exactly ``_rows`` (None otherwise): they
        # let the next walk vouch for an unchanged directory without a per-file row lookup.
        self._dirs: dict[str, DirRecord] | None = None
        self._baseline: str | None = None  # manifest of the last capture, when the journal covers since
        self._outside_fp: tuple[object, ...] | None = None
        self._epoch = store.objects.epoch
        # (base manifest, new manifest, paths that differ) of the last journal capture
        self._last_diff: tuple[str, str, frozenset[str]] | None = None
        try:
            st = os.stat(store.root)
            self._store_id: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self._store_id = None

    def _load_rows(self) -> dict[str, CacheRow]:
        if self._rows is None:
            doc = self.store.load_cache()
            if doc.size_cap == self.size_cap and doc.ids == self.store.objects.ids:
                self._rows, self._rows_manifest = doc.rows, doc.manifest
                self._rows_index = (doc.index, doc.total) if doc.index is not None else None
            else:
                self._rows, self._rows_manifest, self._rows_index = {}, None, None
        return self._rows

    def rules_frozen(self) -> None:
        """The rules were just fixed to what this capture read: outside sources no longer count."""
        self._outside_fp = self.rules.outside_fingerprint()

    def forget_baseline(self) -> None:
        self._baseline = None

    def changed_since(self, previous: str, current: str) -> list[str] | None:
        """The paths whose recorded state differs between manifests ``previous`` and ``current``
        (``changes.changed_paths``), when known without reading a manifest from disk: from the
        last journal capture's delta, or from two manifests still in memory; None otherwise."""
        if previous == current:
            return []
        if self._last_diff is not None and self._last_diff[:2] == (previous, current):
            return sorted(self._last_diff[2])
        a, b = self.store.cached_manifest(previous), self.store.cached_manifest(current)
        if a is None or b is None:
            return None
        return sorted(changed_paths(a, b))

    def scan(self) -> tuple[str, CaptureStats]:
        """Capture the workspace's current state; returns (manifest digest, stats)."""
        self._last_diff = None
        t0 = time.perf_counter()
        if self._epoch != self.store.objects.epoch:
            # a gc swept since this process last looked: rows and the baseline may name objects
            # no committed snapshot referenced (and so were swept); start from the disk cache
            self._epoch = self.store.objects.epoch
            self._rows = self._rows_manifest = self._dirs = self._baseline = None
        # A walk of a big tree makes a few hundred thousand tuples and no reference cycles; the
        # cyclic collector would otherwise traverse the whole heap several times meanwhile.
        paused = gc.isenabled()
        gc.disable()
        try:
            digest, stats = self._scan()
        finally:
            if paused:
                gc.enable()
        self.store.objects.seal()  # git blobs referenced are pinned before anything names them
        return digest, dataclasses.replace(stats, seconds=time.perf_counter() - t0)

    def _scan(self) -> tuple[str, CaptureStats]:
        rows = self._load_rows()
        reason = self._journal_unusable()
        if reason is None:
            dirty, trees = self.journal.drain()
            if any(p.rsplit("/", 1)[-1] in RULE_FILES for p in dirty | trees):
                reason = "an ignore file changed"
            else:
                return self._scan_journal(dirty, trees, rows)
        return self._scan_full(rows, reason)

    def _journal_unusable(self) -> str | None:
        if not self.journal.active:
            return "not watching"
        if not self.journal.trusted():
            return f"journal untrusted: {self.journal.broken}"
        if self._baseline is None:
            return "no baseline in this process"
        if self.rules.outside_fingerprint() != self._outside_fp:
            return "info/exclude or a parent .gitignore changed"
        return None

    def _scan_full(self, rows: dict[str, CacheRow], reason: str | None) -> tuple[str, CaptureStats]:
        self.journal.begin_walk()
        fp = self.rules.outside_fingerprint()
        if fp != self._outside_fp:
            self.rules.reload_outside()
            fp = self.rules.outside_fingerprint()  # the reload may have found new sources
        self._outside_fp = fp
        on_dir = self.journal.watch_dir if self.journal.active else None
        scan = Scan(self.ws, self.rules, self.store.objects, self.size_cap, rows, self._store_id, on_dir,
                    self._dirs)
        scan.walk("", self.rules.root_levels)
        n_rows = scan.n_rows
        # Every row found is a trusted old row, as many as there were: the walk found exactly
        # the old rows (no flattening); and with no path skipped without a row, the manifest
        # those rows were made for is this state's manifest - no serialisation at all.
        same_rows = scan.hits == n_rows == len(rows)
        # (rows that leave out what the index vouched for stand for their manifest only with it)
        unchanged = (same_rows and self._rows_manifest is not None and self._rows_index is None
                     and not scan.extra_skipped)
        if not unchanged and self._same_with_index(scan, rows):
            # the saved rows plus what the same index vouched for: the saved manifest again
            new_rows = scan.found_rows()
            digest = self._rows_manifest
            assert digest is not None
            self._rows_dirty = True
            unchanged = True
        elif unchanged:
            new_rows = rows
            digest = self._rows_manifest
            assert digest is not None
        else:
            if same_rows:
                new_rows = rows
                entries, skipped = manifest_parts(new_rows, scan.extra_skipped)
            else:
                new_rows, entries, skipped = scan.found_rows_and_parts()
            digest = self.store.put_manifest(entries, skipped)
            self._rows_dirty = True
        self._finish(new_rows, digest, exact=not scan.extra_skipped)
        self._dirs = scan.dirs
        stats = CaptureStats("full", scan.hashed, n_rows, unchanged,
                             reason if self.journal.active else None)
        return digest, stats

    def _same_with_index(self, scan: Scan, rows: dict[str, CacheRow]) -> bool:
        """Whether this walk found exactly the state the loaded cache was saved for, although
        that cache left out the rows git's index vouched for (``_beyond_index``): every saved
        row matched, every other path took its entry from the same index (byte-identical, so
        each such path had this very stat when saved - a file changed since would not match an
        entry written before), and the counts agree."""
        if self._rows_index is None or self._rows_manifest is None or scan.extra_skipped or scan.hashed:
            return False
        checksum, total = self._rows_index
        git = self.store.objects.git if self.store.objects.ids == "git" else None
        return (git is not None and scan.hits == len(rows) and scan.hits + scan.from_index == scan.n_rows == total
                and git.index_checksum() == checksum)

    def _scan_journal(self, dirty: set[str], trees: set[str], rows: dict[str, CacheRow]) -> tuple[str, CaptureStats]:
        assert self._baseline is not None
        base_digest = self._baseline
        if not dirty and not trees:
            return base_digest, CaptureStats("journal", 0, 0, True)
        base = self.store.read_manifest(base_digest)
        gone = dirty | trees
        if trees:
            prefixes = tuple(t + "/" for t in trees)
            gone.update(p for p in rows if p.startswith(prefixes))
            gone.update(p for p in base.skipped if p.startswith(prefixes))
        scan = Scan(self.ws, self.rules, self.store.objects, self.size_cap, rows, self._store_id,
                    self.journal.watch_dir)
        for p in sorted(trees):
            scan.rescan(p)
        for p in sorted(dirty):
            scan.rescan(p)
        # a directory whose last entry went (or that gained its first) changes its empty-dir row
        parents = {p.rpartition("/")[0] for p in gone} - {""}
        for d in sorted(parents):
            scan.note_if_empty_dir(d)
        gone |= parents
        found = scan.found_rows()
        new_rows = dict(rows)
        entries, skipped = dict(base.entries), dict(base.skipped)
        d_entries: dict[str, Entry] = {}
        d_skipped: dict[str, str] = {}
        removed: list[str] = []
        for p in gone:
            if p not in found and p not in scan.extra_skipped:
                new_rows.pop(p, None)
                if entries.pop(p, None) is not None or skipped.pop(p, None) is not None:
                    removed.append(p)
        for p, row in found.items():
            new_rows[p] = row
            key, h, _trusted, target = row
            if h[0] == "!":
                entries.pop(p, None)
                if base.skipped.get(p) != h[1:] or p in base.entries:
                    d_skipped[p] = h[1:]
                skipped[p] = h[1:]
            else:
                skipped.pop(p, None)
                entry = (h, key[4], key[0], target)
                if base.entries.get(p) != entry:
                    d_entries[p] = entry
                entries[p] = entry
        for p, reason in scan.extra_skipped.items():
            entries.pop(p, None)
            new_rows.pop(p, None)
            if base.skipped.get(p) != reason or p in base.entries:
                d_skipped[p] = reason
            skipped[p] = reason
        removed = [p for p in removed if p not in d_entries and p not in d_skipped]
        n_changes = len(d_entries) + len(d_skipped) + len(removed)
        diff = frozenset(d_entries) | frozenset(d_skipped) | frozenset(removed)
        if n_changes == 0:
            digest = base_digest
        elif (self.store.depth_of(base_digest) >= MAX_DELTA_DEPTH
              or n_changes > len(base.entries) // 8 + 64):
            digest = self.store.put_manifest(entries, skipped)  # re-base: a full manifest again
        else:
            full = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries,
                                            skipped=skipped, removed=[], ids=self.store.objects.ids)
            digest = self.store.put_delta(base_digest, self.store.depth_of(base_digest), d_entries,
                                          d_skipped, removed, full)
        self._rows_dirty = True
        self._last_diff = (base_digest, digest, diff)
        self._finish(new_rows, digest, exact=len(entries) + len(skipped) == len(new_rows))
        return digest, CaptureStats("journal", scan.hashed, len(dirty) + len(trees), digest == base_digest)

    def _finish(self, rows: dict[str, CacheRow], digest: str, *, exact: bool) -> None:
        # The rows vouch for a manifest only when they cover exactly its paths (a name that
        # could not be encoded or an unlistable directory is skipped without a row).
        self._rows, self._rows_manifest, self._rows_index = rows, (digest if exact else None), None
        self._dirs = None  # a full walk sets its own right after
        self._baseline = digest if self.journal.active else None
        hook = os.environ.get(PAUSE_HOOK_ENV)
        if hook:
            Path(hook).write_text(str(os.getpid()))
            time.sleep(60)

    def save_cache(self, *, force: bool = False) -> None:
        """Persist the stat cache (after the capture it describes has committed).

        Skipped after a journal capture unless forced: the in-memory rows serve this process,
        and rewriting 20,000 rows per boundary would cost more than the capture itself. A stale
        cache on disk is still correct (every row is re-checked against the file's stat).
        """
        if not force and self._baseline is not None:
            return
        if self._rows_dirty and self._rows is not None:
            rows, index, total = self._rows, None, 0
            beyond = self._beyond_index(rows)
            if beyond is not None:
                # the rest are re-derived from git's index by the next walk, as this one did
                rows, index, total = beyond[0], beyond[1], len(rows)
            self.store.save_cache(StatCacheDoc.model_construct(
                format_version=StatCacheDoc.FORMAT_VERSION, manifest=self._rows_manifest,
                ids=self.store.objects.ids, size_cap=self.size_cap, rows=rows, index=index, total=total))
            self._rows_dirty = False

    def _beyond_index(self, rows: dict[str, CacheRow]) -> tuple[dict[str, CacheRow], str] | None:
        """(The rows git's index cannot vouch for, that index's checksum) for a git-ids run, or
        None when it vouches for none.

        A row whose stat and blob id equal the index entry's (not racily clean) is what the
        walk's index shortcut would make again, so the persisted cache leaves it out: its size
        follows what differs from the index (what the run changed), not the tree, and a new
        process loads only that (issue 13 point 3)."""
        if self.store.objects.ids != "git":
            return None
        git = self.store.objects.git
        index = git.index_rows() if git is not None else None
        checksum = git.index_checksum() if git is not None else None
        if not index or checksum is None:
            return None
        get = index.get
        out: dict[str, CacheRow] = {}
        for p, row in rows.items():
            key = row[0]
            known = get(p)
            if (known is None or known[4] != row[1] or known[1] != key[1] or known[2] != key[2]
                    or known[0] != key[0] & 0xFFFFFFFF or known[3] != key[3] & 0xFFFFFFFF
                    or key[4] & 0o170000 != 0o100000):
                out[p] = row
        return (out, checksum) if len(out) < len(rows) else None
