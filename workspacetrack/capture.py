"""Turning the workspace into a manifest: by full stat walk, or from the journal's changed paths.

Both paths produce the same (entries, skipped, stat rows) triple for the same disk state; the
journal path starts from the previous capture's triple and re-examines only what the journal
names, through the very code (``Scan.rescan``) the walk uses for each path.

What a capture stores follows what changed, by either path: a journal capture, and a walk
after a walk of the same process (whose per-directory records hold exactly the rows of the
last manifest), store a DELTA manifest against the last one (``_store_change``: the base itself
when nothing changed; a full manifest again past ``MAX_DELTA_DEPTH`` or when a large part of
the tree changed) and remember the changed paths, so the boundary's ``changed`` list costs
nothing. The persisted stat cache of a git-ids run holds only the rows git's index does not
vouch for; ``Capturer._beyond`` carries that set from capture to capture (re-checking only the
changed paths against the same index), so saving it costs what changed, not the tree.

A new process starts warm (``Capturer._warm``, docs/technical/durability.md "Warm start"): the
stat cache keeps a fingerprint of every directory listing behind a manifest; a walk takes each
directory listed with the same fingerprint from that manifest as it is, and examines the rest.

Crash safety is the store's (``workspacetrack.store``): every object and manifest is written
and flushed before the state names it; a delta names its base, which the state already names.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workspacetrack.changes import changed_paths
from workspacetrack.ignore import RULE_FILES, IgnoreRules
from workspacetrack.journal import Journal
from workspacetrack.models import EMPTY_DIR, CacheRow, Entry, Manifest, StatCacheDoc
from workspacetrack.store import TrackStore, apply_delta
from workspacetrack.walk import DirRecord, Scan, manifest_parts

# Test hook: when set to a file path, a capture creates that file once its objects are written
# and then sleeps, so a test can SIGKILL it between writing objects and committing.
PAUSE_HOOK_ENV = "ITERION_TRACK_TEST_PAUSE_MID_CAPTURE"
# A journal capture stores a delta manifest; past this many stacked deltas it writes a full one.
MAX_DELTA_DEPTH = 8
# Set to 0 (or false/no/off): a new process walks as before, examining every directory (a kill
# switch for the warm start, and what the tests compare it against).
WARM_ENV = "ITERION_TRACK_WARM_START"


def warm_enabled() -> bool:
    return os.environ.get(WARM_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class CaptureStats:
    mode: Literal["full", "journal", "alias"]
    hashed: int         # files read and hashed by this capture
    examined: int       # paths stat'ed (the whole tree for a walk, the journal's paths otherwise)
    reused_manifest: bool
    fallback_reason: str | None = None
    seconds: float = 0.0  # the scan phase alone (walk or journal, hashing, manifest), before the commit
    warm_dirs: int = 0  # directories a new process took from the previous one's manifest (warm start)


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
        # (index checksum C, rows): the rows of ``_rows`` index C may not vouch for; C vouches
        # for every other row of ``_rows`` (``IndexView.vouches``). None: unknown, ``save_cache`` works
        # it out over all rows. Kept up to date by a walk so a save costs what changed.
        self._beyond: tuple[str, dict[str, CacheRow]] | None = None
        self._baseline: str | None = None  # manifest of the last capture, when the journal covers since
        self._outside_fp: tuple[object, ...] | None = None
        self._epoch = store.objects.epoch
        # (base manifest, new manifest, paths that differ) of the last journal capture
        self._last_diff: tuple[str, str, frozenset[str]] | None = None
        # The warm start (module doc): the directory fingerprints of the walks behind manifest
        # ``_fps_manifest`` (``StatCacheDoc.dirs``), kept up to date by every capture; dirty:
        # not saved yet. ``_doc``: the stat cache as last loaded or saved.
        self._fps: dict[str, str] | None = None
        self._fps_manifest: str | None = None
        self._fps_dirty = False
        self._fps_pending: tuple[dict[str, str], str] | None = None
        self._doc: StatCacheDoc | None = None
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
                self._doc = doc
                self._fps = doc.dirs if doc.dirs and doc.dirs_manifest is not None else None
                self._fps_manifest = doc.dirs_manifest if self._fps is not None else None
            else:
                self._rows, self._rows_manifest, self._rows_index = {}, None, None
                self._doc, self._fps, self._fps_manifest = None, None, None
            self._fps_dirty = False
        return self._rows

    def rules_frozen(self) -> None:
        """The rules were just fixed to what this capture read: outside sources no longer count."""
        self._outside_fp = self.rules.outside_fingerprint()
        if self._fps_pending is not None:
            self._fps, self._fps_manifest = self._fps_pending
            self._fps_pending = None

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
            self._rows = self._rows_manifest = self._dirs = self._baseline = self._beyond = None
            self._fps = self._fps_manifest = None
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
        frozen = self.rules.frozen  # fingerprints vouch for a listing under fixed rules only
        # (a walk after a walk of this process has its per-directory records: better still)
        warm = self._fps if self.can_warm() else None
        scan = Scan(self.ws, self.rules, self.store.objects, self.size_cap, rows, self._store_id, on_dir,
                    self._dirs, warm=warm)
        scan.walk("", self.rules.root_levels)
        if warm is not None:
            done = self._warm(scan, warm, reason)
            if done is not None:
                return done
            # the warm start's base manifest is gone: walk again, examining every directory
            scan = Scan(self.ws, self.rules, self.store.objects, self.size_cap, rows, self._store_id, on_dir)
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
            assert self._rows_index is not None
            # the saved rows' paths (re-read ones with their new stat), not vouched for by C
            beyond: tuple[str, dict[str, CacheRow]] | None = (self._rows_index[0], {p: new_rows[p] for p in rows})
        elif unchanged:
            new_rows = rows
            digest = self._rows_manifest
            assert digest is not None
            beyond = self._beyond
        elif (self._dirs is not None and self._rows_manifest is not None and self._rows_index is None
              and not scan.extra_skipped and not scan.rows):
            # The last walk of this process recorded exactly ``rows`` for ``_rows_manifest``:
            # what differs follows from the directory records this walk listed anew, and the
            # capture stores a delta (its cost follows the changes, not the tree).
            new_rows, digest = self._walk_delta(rows, self._dirs, scan.dirs, self._rows_manifest)
            stats = CaptureStats("full", scan.hashed, n_rows, digest == self._rows_manifest,
                                 reason if self.journal.active else None)
            self._finish(new_rows, digest, exact=True, beyond=self._beyond)
            self._dirs = scan.dirs
            self._note_fps(scan, digest, frozen)
            return digest, stats
        else:
            entries_json = None
            if same_rows:
                new_rows = rows
                entries, skipped = manifest_parts(new_rows, scan.extra_skipped)
            else:
                new_rows, entries, skipped, entries_json = scan.found_rows_and_parts()
            digest = self.store.put_manifest(entries, skipped, entries_json=entries_json)
            self._rows_dirty = True
            # with no old row reused, every row the walk did not take from its index is in
            # ``made``: the rows that index may not vouch for
            beyond = ((scan.index_checksum, scan.made) if scan.hits == 0 and scan.index_checksum is not None
                      else None)
        self._finish(new_rows, digest, exact=not scan.extra_skipped, beyond=beyond)
        self._dirs = scan.dirs
        self._note_fps(scan, digest, frozen)
        stats = CaptureStats("full", scan.hashed, n_rows, unchanged,
                             reason if self.journal.active else None)
        return digest, stats

    # -- the warm start of a new process ----------------------------------------------------
    def can_warm(self) -> bool:
        """Whether the next walk starts from directory fingerprints (``_warm``): the rules are
        fixed, this process holds no per-directory records of its own, and the cache has them."""
        self._load_rows()
        return (warm_enabled() and self.rules.frozen and self._dirs is None and self._fps is not None
                and self._fps_manifest is not None)

    def _note_fps(self, scan: Scan, digest: str, frozen: bool) -> None:
        """Record the directory fingerprints of walk ``scan``, which found manifest ``digest``:
        a directory vouches for its entries only when every row it holds is trusted (not racily
        clean: git's racy-timestamp rule, ``walk.RACY_WINDOW_NS``) and every name in its listing
        has a row or an ignore verdict; a directory the warm start took as it was keeps its
        fingerprint. None at all when the walk's rules were not fixed yet or a path was skipped
        without a row (its manifest holds a path no listing accounts for)."""
        self._fps_dirty = True
        self._fps_pending = None
        if scan.extra_skipped or scan.rows or not scan.listed:
            self._fps = self._fps_manifest = None
            return
        fps: dict[str, str] = {}
        dirs, hit = scan.dirs, scan.warm_hit
        before = self._fps or {}
        for d, fp in scan.listed.items():
            if d in hit or before.get(d) == fp:  # (the same listing a vouching record was made of)
                fps[d] = fp
                continue
            rec = dirs.get(d)
            ok = rec is not None and rec[2] is not None and all(row[2] for row in rec[1].values())
            fps[d] = fp if ok else ""
        if frozen:
            self._fps, self._fps_manifest = fps, digest
        else:
            # the run's first walk: valid once its rules are frozen to what it read (``rules_frozen``)
            self._fps = self._fps_manifest = None
            self._fps_pending = (fps, digest)

    def _warm(self, scan: Scan, warm: dict[str, str], reason: str | None) -> tuple[str, CaptureStats] | None:
        """The state a warm walk found: the fingerprinted manifest for every directory whose
        listing is the same (``Scan.warm_hit``), the walk's rows for the others. None when that
        manifest is no longer in the store (a gc swept it): the caller walks in full."""
        base_digest = self._fps_manifest
        assert base_digest is not None
        if not self.store.objects.has(base_digest):
            self._fps = self._fps_manifest = None
            return None
        hit = scan.warm_hit
        rows = self._rows if self._rows is not None else {}
        stats_reason = reason if self.journal.active else None
        if (len(hit) == len(scan.listed) == len(warm) and not scan.dirs and not scan.extra_skipped
                and not scan.rows):
            # every directory as the previous process left it: its manifest, not one file read
            # (rows and the rest of the cache stay as loaded: they describe the same state)
            self._dirs = self._beyond = None
            self._baseline = base_digest if self.journal.active else None
            self._last_diff = (base_digest, base_digest, frozenset())
            return base_digest, CaptureStats("full", 0, 0, True, stats_reason, warm_dirs=len(hit))
        base = self.store.read_manifest_once(base_digest)
        # the directories not taken as they were: examined by this walk, or gone
        redo = warm.keys() - hit

        def owner(p: str, h: str) -> str:
            """The directory whose listing records ``p`` (an empty directory records itself)."""
            return p if h == EMPTY_DIR else p.rpartition("/")[0]

        found, new_e, new_s, _ = scan.found_rows_and_parts()
        redo.update(scan.dirs)  # a directory the previous walks did not list (new, or not vouched)
        entries: dict[str, Entry] = {}
        skipped: dict[str, str] = {}
        d_entries: dict[str, Entry] = {}
        d_skipped: dict[str, str] = {}
        removed: list[str] = []
        for p, e in base.entries.items():
            if owner(p, e[0]) not in redo:
                entries[p] = (e[0], e[1], e[2], e[3])
            elif p not in new_e and p not in new_s:
                removed.append(p)
        for p, r in base.skipped.items():
            if p.rpartition("/")[0] not in redo:
                skipped[p] = r
            elif p not in new_e and p not in new_s:
                removed.append(p)
        for p, e in new_e.items():
            was = base.entries.get(p)
            if was is None or (was[0], was[1], was[2], was[3]) != e or p in base.skipped:
                d_entries[p] = e
            entries[p] = e
            skipped.pop(p, None)
        for p, r in new_s.items():
            if base.skipped.get(p) != r or p in base.entries:
                d_skipped[p] = r
            skipped[p] = r
            entries.pop(p, None)
        digest = self._store_change(base_digest, len(base.entries), d_entries, d_skipped, removed,
                                    lambda: (entries, skipped), full_known=True)
        # the loaded rows outside the re-examined directories, and the walk's
        marker = self._rows_index
        new_rows = {p: row for p, row in rows.items() if owner(p, row[1]) not in redo}
        changes: dict[str, CacheRow | None] = {p: None for p in rows.keys() - new_rows.keys()}
        changes.update(found)
        new_rows.update(found)
        self._rows_dirty = True
        self._finish(new_rows, digest, exact=False, beyond=None)
        if not scan.extra_skipped:  # (a path skipped without a row is in neither form)
            self._keep_index_marker(marker, rows, changes, digest, len(entries) + len(skipped))
        self._note_fps(scan, digest, True)
        return digest, CaptureStats("full", scan.hashed, scan.n_rows, digest == base_digest, stats_reason,
                                    warm_dirs=len(hit))

    def _walk_delta(self, rows: dict[str, CacheRow], old_dirs: dict[str, DirRecord],
                    new_dirs: dict[str, DirRecord], base_digest: str) -> tuple[dict[str, CacheRow], str]:
        """(new rows, manifest digest) of a walk whose predecessor's records ``old_dirs`` hold
        exactly ``rows``, the rows of manifest ``base_digest``. A record this walk reused
        (``Scan._same_dir``: the very same object) changed nothing; the others are compared
        name by name. A path can leave one record and enter another (a file replaced by an
        empty directory): its new row wins over its removal."""
        changes: dict[str, CacheRow | None] = {}
        gone: list[str] = []
        for d, rec in new_dirs.items():
            old = old_dirs.get(d)
            if old is rec:
                continue
            prefix = d + "/" if d else ""
            names = rec[1]
            old_names = old[1] if old is not None else {}
            get = old_names.get
            for name, row in names.items():
                if get(name) != row:
                    changes[prefix + name if name else d] = row
            if old is not None:
                gone.extend(prefix + n if n else d for n in old_names.keys() - names.keys())
        for d, old in old_dirs.items():
            if d not in new_dirs:
                prefix = d + "/" if d else ""
                gone.extend(prefix + n if n else d for n in old[1])
        for p in gone:
            changes.setdefault(p, None)
        new_rows = dict(rows)
        d_entries: dict[str, Entry] = {}
        d_skipped: dict[str, str] = {}
        removed: list[str] = []
        for p, change in changes.items():
            before = rows.get(p)
            if change is None:
                del new_rows[p]
                removed.append(p)  # in the base manifest: its rows are exactly that manifest's paths
                continue
            new_rows[p] = change
            key, h, _trusted, target = change
            if h[0] == "!":
                if before is None or before[1] != h:
                    d_skipped[p] = h[1:]
            else:
                entry = (h, key[4], key[0], target)
                if before is None or before[1][0] == "!" or (before[1], before[0][4], before[0][0], before[3]) != entry:
                    d_entries[p] = entry
        self._rows_dirty = True
        self._update_beyond(changes)  # before ``_finish`` takes it for the new rows
        digest = self._store_change(base_digest, len(rows), d_entries, d_skipped, removed,
                                    lambda: manifest_parts(new_rows, {}))
        return new_rows, digest

    def _store_change(self, base_digest: str, base_size: int, d_entries: dict[str, Entry],
                      d_skipped: dict[str, str], removed: list[str],
                      full_parts: Callable[[], tuple[dict[str, Entry], dict[str, str]]], *,
                      full_known: bool = False) -> str:
        """The digest of the state ``base_digest`` plus these changes: the base itself when
        there are none, a delta manifest, or a full one when the chain of deltas is deep or
        the change is a large part of the tree. ``full_parts`` gives the whole new state, asked
        only when the base's is not in memory to apply the changes to (or a full one is due),
        or always when ``full_known`` (it is at hand).
        Remembers the changed paths for ``changed_since``."""
        diff = frozenset(d_entries) | frozenset(d_skipped) | frozenset(removed)
        if not diff:
            self._last_diff = (base_digest, base_digest, diff)
            return base_digest
        depth = self.store.depth_of(base_digest)
        if depth >= MAX_DELTA_DEPTH or len(diff) > base_size // 8 + 64:
            digest = self.store.put_manifest(*full_parts())  # re-base: a full manifest again
        else:
            base = None if full_known else self.store.cached_manifest(base_digest)
            ids = self.store.objects.ids
            if base is not None:
                full = apply_delta(base, Manifest.model_construct(
                    format_version=Manifest.FORMAT_VERSION, entries=d_entries, skipped=d_skipped,
                    removed=removed, ids=ids))
            else:
                entries, skipped = full_parts()
                full = Manifest.model_construct(format_version=Manifest.FORMAT_VERSION, entries=entries,
                                                skipped=skipped, removed=[], ids=ids)
            digest = self.store.put_delta(base_digest, depth, d_entries, d_skipped, removed, full)
        self._last_diff = (base_digest, digest, diff)
        return digest

    def _same_with_index(self, scan: Scan, rows: dict[str, CacheRow]) -> bool:
        """Whether this walk found exactly the state the loaded cache was saved for, although
        that cache left out the rows git's index vouched for (``_beyond_index``): every saved
        row was found, reused or re-read with the same entry (a racily clean row is re-read),
        every other path took its entry from the same index (byte-identical, so each such path
        had this very stat when saved - a file changed since would not match an entry written
        before), and the counts agree."""
        if (self._rows_index is None or self._rows_manifest is None or scan.extra_skipped
                or scan.rows or self.store.objects.ids != "git"):
            return False
        checksum, total = self._rows_index
        if scan.n_rows != total or len(scan.made) + scan.hits > len(rows):
            return False
        for p, row in scan.made.items():
            old = rows.get(p)
            if old is None or old[1] != row[1] or old[0][4] != row[0][4] or old[0][0] != row[0][0] or old[3] != row[3]:
                return False
        # the rest of the rows were reused (``hits``) or taken from the scan's index
        if scan.hits + len(scan.made) != len(rows):
            return False
        return scan.hits + len(scan.made) == scan.n_rows or scan.index_checksum == checksum

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
        digest = self._store_change(base_digest, len(base.entries), d_entries, d_skipped, removed,
                                    lambda: (entries, skipped), full_known=True)
        self._rows_dirty = True
        marker = self._rows_index
        self._finish(new_rows, digest, exact=len(entries) + len(skipped) == len(new_rows), beyond=None)
        if marker is not None and not scan.extra_skipped:  # (a path skipped without a row: in neither form)
            changes: dict[str, CacheRow | None] = {p: new_rows.get(p) for p in gone | found.keys()}
            self._keep_index_marker(marker, rows, changes, digest, len(entries) + len(skipped))
        self._journal_fps(base_digest, digest, dirty | trees, trees, bool(scan.extra_skipped))
        return digest, CaptureStats("journal", scan.hashed, len(dirty) + len(trees), digest == base_digest)

    def _keep_index_marker(self, marker: tuple[str, int] | None, rows: dict[str, CacheRow],
                           changes: dict[str, CacheRow | None], digest: str, total: int) -> None:
        """After a capture that started from rows leaving out what index ``marker`` vouched for
        (a cache as loaded: ``StatCacheDoc.index``) and changed only ``changes`` (path -> new
        row, None: gone): keep that form for manifest ``digest`` of ``total`` paths when git's
        index is still that one, re-checking only the changed paths against it (so the next
        process, and a rewind's ``drift``, can rely on it); else the rows stand for no manifest."""
        git = self.store.objects.git if self.store.objects.ids == "git" else None
        index = git.index_view() if git is not None and marker is not None else None
        if marker is None or git is None or index is None or git.index_checksum() != marker[0]:
            return
        kept = dict(rows)
        for p, row in changes.items():
            if row is None or index.vouches(p, row):
                kept.pop(p, None)
            else:
                kept[p] = row
        self._rows, self._rows_manifest, self._rows_index = kept, digest, (marker[0], total)
        self._beyond = None

    def _journal_fps(self, base: str, digest: str, named: set[str], trees: set[str], skipped: bool) -> None:
        """Carry the fingerprints of ``base`` over to ``digest``, a journal capture on it: every
        directory the journal ``named`` a path of (or that lies in a tree it named) must be
        listed and examined again by a warm start; the others' entries are the same in both (an
        empty directory's own entry belongs to it: it is named as the parent of what went)."""
        if self._fps is None or self._fps_manifest != base:
            return
        self._fps_dirty = True
        if skipped:
            self._fps = self._fps_manifest = None
            return
        fps = dict(self._fps)
        touched = {p.rpartition("/")[0] for p in named} | named
        if trees:
            prefixes = tuple(t + "/" for t in trees)
            touched.update(d for d in fps if d.startswith(prefixes))
        for d in touched:
            if d in fps:
                fps[d] = ""
        self._fps, self._fps_manifest = fps, digest

    def _finish(self, rows: dict[str, CacheRow], digest: str, *, exact: bool,
                beyond: tuple[str, dict[str, CacheRow]] | None) -> None:
        # The rows vouch for a manifest only when they cover exactly its paths (a name that
        # could not be encoded or an unlistable directory is skipped without a row).
        self._rows, self._rows_manifest, self._rows_index = rows, (digest if exact else None), None
        self._beyond = beyond
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
        if not self._rows_dirty and self._fps_dirty and self._doc is not None:
            # the rows as loaded (or last saved) stand: only the fingerprints are news
            doc = self._doc.model_copy(update={"dirs": self._fps or {}, "dirs_manifest": self._fps_manifest})
            self.store.save_cache(doc)
            self._doc, self._fps_dirty = doc, False
            return
        if self._rows_dirty and self._rows is not None and self._rows_index is not None:
            # rows that leave out what that index vouches for (``_keep_index_marker``): as they are
            doc = StatCacheDoc.model_construct(
                format_version=StatCacheDoc.FORMAT_VERSION, manifest=self._rows_manifest,
                ids=self.store.objects.ids, size_cap=self.size_cap, rows=self._rows,
                index=self._rows_index[0], total=self._rows_index[1],
                dirs=self._fps or {}, dirs_manifest=self._fps_manifest if self._fps else None)
            self.store.save_cache(doc)
            self._doc, self._rows_dirty, self._fps_dirty = doc, False, False
            return
        if self._rows_dirty and self._rows is not None:
            rows, index, total = self._rows, None, 0
            known = self._beyond
            if known is None:
                beyond = self._beyond_index(rows)
                # what the next walk carries over, re-checking only the paths it changes
                self._beyond = (beyond[1], beyond[0]) if beyond is not None else None
            else:
                beyond = (known[1], known[0]) if len(known[1]) < len(rows) else None
            if beyond is not None:
                # the rest are re-derived from git's index by the next walk, as this one did
                rows, index, total = beyond[0], beyond[1], len(rows)
            doc = StatCacheDoc.model_construct(
                format_version=StatCacheDoc.FORMAT_VERSION, manifest=self._rows_manifest,
                ids=self.store.objects.ids, size_cap=self.size_cap, rows=rows, index=index, total=total,
                dirs=self._fps or {}, dirs_manifest=self._fps_manifest if self._fps else None)
            self.store.save_cache(doc)
            self._doc, self._rows_dirty, self._fps_dirty = doc, False, False

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
        index = git.index_view() if git is not None else None
        checksum = git.index_checksum() if git is not None else None
        if index is None or checksum is None:
            return None
        out = index.beyond(rows)
        return (out, checksum) if len(out) < len(rows) else None

    def _update_beyond(self, changes: dict[str, CacheRow | None]) -> None:
        """Carry ``_beyond`` over to the rows ``_rows`` becomes with ``changes`` (path -> new
        row, None: gone), re-checking only those paths, against the same index; when the index
        changed since, forget it (the next save works it out in full)."""
        if self._beyond is None:
            return
        checksum, beyond = self._beyond
        git = self.store.objects.git if self.store.objects.ids == "git" else None
        index = git.index_view() if git is not None else None
        if index is None or git is None or git.index_checksum() != checksum:
            self._beyond = None
            return
        beyond = dict(beyond)
        for p, row in changes.items():
            if row is None or index.vouches(p, row):
                beyond.pop(p, None)
            else:
                beyond[p] = row
        self._beyond = (checksum, beyond)
