"""The stat walk: list the workspace, re-hash only what the stat cache cannot vouch for.

A file is re-read when its (size, mtime_ns, ctime_ns, inode, mode) differs from the cached row,
or when its row is "racily clean": a file whose timestamps fall within RACY_WINDOW_NS of the
capture that hashed it could be rewritten within the same timestamp tick without its stat
changing, so its row is kept but not trusted (git's racy-index rule, with a wide margin for
coarse filesystem clocks).

A walk groups its rows by directory and keeps, per directory, the rule levels in effect and the
names the rules excluded (``DirRecord``). The next walk in the same process checks a directory
listed under the same rules against that record first: when every file matches its trusted row
and no name is new or gone, the record stands as it is - no ignore match, no path string and no
dict insert per file, which is most of an unchanged capture's cost above the stat calls. Any
difference sends the directory through the full per-entry examination (``_list_dir``).
"""

from __future__ import annotations

import hashlib
import os
import stat as st_mod
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from types import ModuleType

from workspacetrack.bigfiles import STREAM_MIN
from workspacetrack.fastext import FAST, note_slow_path
from workspacetrack.gitsource import IndexView
from workspacetrack.ignore import RULE_FILES, IgnoreRules, Levels, Matcher, is_ignored
from workspacetrack.models import (
    EMPTY_DIR,
    CacheRow,
    Entry,
    SkipReason,
    StatKey,
)
from workspacetrack.objects import ObjectStore

# The per-directory loops in C (workspacetrack/_fastwalk.c, built by setup.py when a compiler is
# there); None: the Python twins below do the same work. Tests set it to None to compare both.
_fast: ModuleType | None = FAST

RACY_WINDOW_NS = 2_000_000_000
_RULE_SET = frozenset(RULE_FILES)
# threads listing a batch: one per core (listing is kernel CPU time, and the walk's own thread
# needs a core while it examines the previous batch: measured best on 2 cores); at least 2
_THREADS = min(8, max(2, os.cpu_count() or 1))
# directories listed per call, and calls in flight while the walk examines an earlier batch
_BATCH = 64
_AHEAD = 2
NAME_CACHE_MAX = 500_000  # bound on remembered ignore verdicts per rule file
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

# A directory's entries with their lstat keys (None: the entry vanished before its lstat).
Listing = list[tuple[str, "StatKey | None"]]
OnDir = Callable[[str, str], None]  # (absolute dir, workspace-relative dir)
# Directories found and not yet listed, with the rule levels in effect in them (a deque: the
# walk takes batches from its head while it appends what it finds).
Queue = deque[tuple[str, Levels]]
# What a walk recorded of one directory: the rule levels in effect in it, its files' rows by
# name, and the names of the files those rules excluded (None: a name was skipped without a
# row, e.g. unencodable, so the record cannot vouch for the directory's listing).
DirRecord = tuple[Levels, dict[str, CacheRow], frozenset[str] | None]


class Scan:
    """One capture's view of the workspace: entries, skipped paths and the new stat-cache rows."""

    def __init__(self, workspace: str, rules: IgnoreRules, objects: ObjectStore, size_cap: int,
                 old_rows: dict[str, CacheRow], store_id: tuple[int, int] | None,
                 on_dir: OnDir | None = None, old_dirs: dict[str, DirRecord] | None = None, *,
                 use_index: bool = True, warm: dict[str, str] | None = None) -> None:
        note_slow_path()  # once per process, when the C extension is not in use
        self.ws = workspace
        self.rules = rules
        self.objects = objects
        self.size_cap = size_cap
        self.old_rows = old_rows
        self.store_id = store_id
        self.on_dir = on_dir
        # The walk records only stat-cache rows (a row holds everything a manifest entry needs);
        # entries are derived from them only when the manifest has to be written. ``old_dirs``
        # is the previous walk's per-directory view of ``old_rows`` (same rows, grouped).
        self.old_dirs = old_dirs or {}
        self.rows: dict[str, CacheRow] = {}  # rows of single paths (``visit``, the journal's)
        self.dirs: dict[str, DirRecord] = {}  # rows of listed directories (``walk``)
        self.n_rows = 0    # rows in ``dirs``
        self.extra_skipped: dict[str, str] = {}  # skipped without a stat row (unencodable, unlistable)
        self.hits = 0      # paths vouched for by a trusted cache row
        self.from_index = 0  # paths whose row took git's index entry (stat matched, file unread)
        self.hashed = 0    # files (or link targets) actually read
        self.threshold = time.time_ns() - RACY_WINDOW_NS
        self._dir_levels: dict[str, Levels | None] = {}
        # git's index, where its stat vouches for a file's blob id (workspacetrack.gitsource)
        # (read on the first file a stat row cannot vouch for: an unchanged capture never asks;
        # ``use_index`` False: a scan of a few paths reads them rather than parse the whole index)
        self.git = objects.git if objects.ids == "git" and use_index else None
        self._index: IndexView | None = None
        self._index_read = False
        self._index_taken = False  # a row took a blob id from it (its tree is pinned at seal)
        self.index_checksum: str | None = None  # that index's (``GitSource.index_checksum``)
        # rows of ``dirs`` neither reused from ``old_rows`` nor taken from the index by
        # ``_list_dir``: with no reused row, the index vouches for every row not in here
        self.made: dict[str, CacheRow] = {}
        # The warm start (``Capturer._warm``): directory -> fingerprint of its listing as a
        # previous walk recorded it. A directory listed with the same fingerprint is not
        # examined: the previous walk's entries for it stand, and its subdirectories are the
        # ones that walk listed under it (``warm_hit``). ``listed``: this walk's fingerprints.
        self.warm = warm
        self._warm_children: dict[str, list[str]] = {}
        if warm:
            for sub in warm:
                if sub:
                    parent, _, name = sub.rpartition("/")
                    self._warm_children.setdefault(parent, []).append(name)
        self.warm_hit: set[str] = set()
        self.listed: dict[str, str] = {}

    def _git_index(self) -> IndexView | None:
        """git's index rows, read on the first file a stat row cannot vouch for."""
        if not self._index_read and self.git is not None:
            self._index_read = True
            self._index = self.git.index_view()
            if self._index is not None:
                self.index_checksum = self.git.index_checksum()
        return self._index

    def _index_used(self) -> None:
        if not self._index_taken:
            self._index_taken = True
            assert self.git is not None
            self.git.used_index()

    # -- one path ---------------------------------------------------------------------------
    def visit(self, rel: str, st: os.stat_result) -> None:
        self.rows[rel] = self._row(rel, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode))

    def _row(self, rel: str, key: StatKey) -> CacheRow:
        """The stat-cache row of ``rel`` (whose lstat is ``key``): its trusted cached row, or
        one made by reading it."""
        size, mtime_ns, ctime_ns, ino, mode = key
        row = self.old_rows.get(rel)
        if row is not None and row[2] and row[0] == key:
            self.hits += 1
            return row
        trusted = max(mtime_ns, ctime_ns) < self.threshold
        absp = f"{self.ws}/{rel}"
        if st_mod.S_ISLNK(mode):
            try:
                target = os.readlink(absp)
            except OSError:
                return self._skip(key, SkipReason.UNREADABLE, False)
            raw = os.fsencode(target)
            h = self.objects.put_content(raw)
            self.hashed += 1
            return (key, h, trusted, target)
        elif st_mod.S_ISREG(mode):
            if size > self.size_cap:
                return self._skip(key, SkipReason.OVERSIZED, trusted)
            index = self._git_index()
            if index is not None:
                vouched = index.row(rel, key, self.threshold)
                if vouched is not None:  # git's blob id: the file is not read
                    self._index_used()
                    self.from_index += 1
                    return vouched
            try:
                fd = os.open(absp, _READ_FLAGS)
            except OSError:
                return self._skip(key, SkipReason.UNREADABLE, False)
            try:
                if size >= STREAM_MIN:
                    # large: streamed into the store, holes kept (never whole in memory)
                    h, total = self.objects.put_stream(fd, size)
                    self.hashed += 1
                    return (key, h, trusted and total == size, None)
                chunks = []
                total = 0
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > self.size_cap:
                        break
                    chunks.append(chunk)
            finally:
                os.close(fd)
            if total > self.size_cap:
                return self._skip(key, SkipReason.OVERSIZED, False)
            data = b"".join(chunks)
            h = self.objects.put_content(data)
            self.hashed += 1
            # The row's stat is from before the read: a write racing the read changes the stat,
            # so the next capture re-reads rather than trusting this hash.
            return (key, h, trusted, None)
        else:
            return self._skip(key, SkipReason.SPECIAL, True)

    @staticmethod
    def _skip(key: StatKey, reason: SkipReason, trusted: bool) -> CacheRow:
        return (key, "!" + reason, trusted, None)

    # -- a directory tree -------------------------------------------------------------------
    def walk(self, start: str, levels: Levels) -> None:
        """Capture everything under workspace-relative directory ``start`` ('' = the root).

        Directories are listed in batches, in the order they are found (``_Lister``: by
        ``_fastwalk`` on several threads when built, a batch or two ahead of the one being
        examined; ``on_dir``, the watcher's, is called for each directory before its listing
        starts, so no change after a listing goes unseen), then examined one by one. The order
        only decides when a directory is read, not what is recorded."""
        rules = self.rules
        old_dirs = self.old_dirs
        fast = _fast
        sdev, sino = self.store_id if self.store_id is not None else (-1, -1)
        if not (-1 <= sdev < 1 << 63 and -1 <= sino < 1 << 63):
            fast = None  # the C side takes signed 64-bit ids
        # a rule file in a directory adds a level (unless the rules are frozen): the C check
        # hands such a directory back, since its record's levels must be compared with it
        rule_names = frozenset() if rules.frozen else _RULE_SET
        queued: Queue = deque([(start, levels)])
        lister = _Lister(fast, self.ws, self.on_dir, sdev, sino)
        while True:
            if not lister.inflight:
                lister.feed(queued, force=True)
            got = lister.take()
            if got is None:
                break
            batch, packed = got
            for i, (d, lv) in enumerate(batch):
                if len(queued) >= _BATCH:
                    lister.feed(queued)  # keep listing ahead of the examination
                listing = packed[i] if packed is not None else None
                prefix = d + "/" if d else ""
                old = old_dirs.get(d)
                if rules.frozen:  # the rules of the run's start, whatever the disk holds now
                    added = rules.level_for_dir(d)
                    if added is not None:
                        lv = (*lv, added)
                if listing is not None:
                    fp = self.listed[d] = _fingerprint(listing)
                    if self.warm is not None and self.warm.get(d) == fp:
                        self.warm_hit.add(d)
                        for name in self._warm_children.get(d, ()):
                            self._push_dir(queued, prefix + name, name, lv)
                        continue
                # (an empty listing goes to ``_examine``: the directory's own empty row)
                # (unfrozen rules: ``lv`` holds unless a rule file is here, which C hands back)
                if fast is not None and listing and old is not None and old[2] is not None and old[0] == lv:
                    subs = fast.same_packed(listing, old[1], old[2], not d, rule_names)
                    if subs is not None:
                        self._same_record(d, old)
                        for name in subs:
                            self._push_dir(queued, prefix + name, name, lv)
                        continue
                if fast is not None and listing and self._fresh_dir(fast, queued, d, prefix, listing, lv, rule_names):
                    continue
                try:
                    ents, empty = _entries(lister.path(d), sdev, sino, listing, fast)
                except OSError:
                    if d:
                        self.extra_skipped[d] = SkipReason.UNREADABLE
                    continue
                self._examine(queued, d, prefix, ents, empty, lv, old)

    def _examine(self, queue: Queue, d: str, prefix: str, ents: Listing, empty: bool,
                 lv: Levels, old: DirRecord | None) -> None:
        """Directory ``d`` listed as ``ents`` (``empty``: it holds nothing, not even the store):
        its rule level, then its record again or a full examination; subdirectories to walk go
        to ``queue``."""
        if empty:
            if d:
                self._empty_dir(d, lv)
            return
        rules = self.rules
        if not rules.frozen:  # (frozen: ``walk`` added the directory's level of the run's start)
            for name, _key in ents:
                if name in RULE_FILES:
                    added = rules.level_for_dir(d, {name})
                    if added is not None:
                        lv = (*lv, added)
                    break
        if old is not None and old[2] is not None and old[0] == lv:
            subdirs = self._same_dir(ents, old, not d)
            if subdirs is not None:
                self._same_record(d, old)
                for name in subdirs:
                    self._push_dir(queue, prefix + name, name, lv)
                return
        self._list_dir(queue, d, prefix, ents, lv)

    def _fresh_dir(self, fast: ModuleType, queue: Queue, d: str, prefix: str,
                   listing: bytes, lv: Levels, rule_names: frozenset[str]) -> bool:
        """``_list_dir`` of directory ``d`` done by ``_fastwalk.fresh_dir`` (its C twin) from its
        listing, when the rules in effect are at most one level that looks at names only (the
        common case); False when C does not take it (other rules, a rule file in it, a value C
        cannot hold): the caller then lists it in Python."""
        live, single = _name_rules(lv)
        if not live:
            match, ignores, known = None, {}, {}
        elif single is not None and single.match is not None:
            match, ignores, known = single.match, single.group_ignores, single.name_cache
        else:
            return False
        table = self._index.table if self._index_read and self._index is not None else None
        found = fast.fresh_dir(listing, prefix, os.fsencode(prefix), not d, self.old_rows, table,
                               self.threshold, self.size_cap, known, match, ignores, rule_names)
        if found is None:
            return False
        mine, others, exact, subdirs, todo, hits, taken = found
        for name in subdirs:
            self._push_dir(queue, prefix + name, name, lv)
        if todo:
            if not self._index_read and self.git is not None:
                self._git_index()
            index = self._index
            size_cap, threshold = self.size_cap, self.threshold
            for name, key in todo:
                rel = prefix + name
                if index is not None and key[4] & 0o170000 == 0o100000 and key[0] <= size_cap:
                    vouched = index.row(rel, key, threshold)
                    if vouched is not None:
                        taken += 1
                        mine[name] = vouched
                        continue
                mine[name] = self.made[rel] = self._row(rel, key)
        self._record_dir(d, lv, mine, others, exact, hits, taken)
        return True

    def _record_dir(self, d: str, lv: Levels, mine: dict[str, CacheRow], others: Iterable[str], exact: bool,
                    hits: int, taken: int) -> None:
        """Directory ``d`` examined in full: its rows ``mine`` (``hits`` of them reused, ``taken``
        from git's index), the names the rules excluded, and whether it can vouch for its listing."""
        if taken:
            self._index_used()
            self.from_index += taken
        self.hits += hits
        self.n_rows += len(mine)
        self.dirs[d] = (lv, mine, frozenset(others) if exact else None)

    def _same_record(self, d: str, old: DirRecord) -> None:
        """Directory ``d`` is unchanged against its record: the record stands as it is."""
        self.dirs[d] = old
        n = len(old[1])
        self.hits += n
        self.n_rows += n

    def _empty_dir(self, d: str, lv: Levels) -> None:
        """Record empty directory ``d`` (so a restore recreates it): one row, under the name ''."""
        try:
            mode = os.lstat(f"{self.ws}/{d}").st_mode
        except OSError:
            return
        row: CacheRow = ((0, 0, 0, 0, mode), EMPTY_DIR, True, None)
        if self.old_rows.get(d) == row:
            self.hits += 1
        else:
            self.made[d] = row
        self.n_rows += 1
        self.dirs[d] = (lv, {"": row}, frozenset())

    def note_if_empty_dir(self, rel: str) -> None:
        """For the journal: record ``rel`` if it is now an empty directory the walk would list."""
        if not rel or rel in self.dirs:
            return
        parent = rel.rpartition("/")[0]
        levels = self._levels_inside(parent)
        if levels is None or rel.rsplit("/", 1)[-1] == ".git" or is_ignored(levels, rel, True):
            return
        try:
            st = os.lstat(f"{self.ws}/{rel}")
            if not st_mod.S_ISDIR(st.st_mode):
                return
            if self.store_id is not None and (st.st_dev, st.st_ino) == self.store_id:
                return
            with os.scandir(f"{self.ws}/{rel}") as it:
                if next(it, None) is not None:
                    return
        except OSError:
            return
        self.rows[rel] = ((0, 0, 0, 0, st.st_mode), EMPTY_DIR, True, None)

    @staticmethod
    def _same_dir(ents: Listing, old: DirRecord, root: bool) -> list[str] | None:
        """The hot path of an unchanged directory under the same rules as its recorded walk
        (the Python twin of ``_fastwalk.same_packed``, which ``walk`` tries first): every file
        must match its trusted row by stat and no file may be new or gone; then the recorded
        rows stand as they are (no ignore check, no path string, no dict insert per file).
        Returns the subdirectories to walk, or None when the directory must be re-listed in
        full by ``_list_dir``."""
        _, names, others = old
        assert others is not None
        get = names.get
        subdirs: list[str] = []
        hits = 0
        for name, key in ents:
            if key is None:
                return None  # vanished between listing and stat: let the full listing decide
            row = get(name)
            if row is not None:
                if row[2] and row[0] == key:
                    hits += 1
                    continue
                return None
            if key[4] & 0o170000 == 0o040000:
                if name != ".git":
                    subdirs.append(name)
            elif name == ".git" and root:
                continue  # the root's .git file (a worktree's gitdir pointer)
            elif name not in others:  # a file with no row that the rules did not exclude: new
                return None
        if hits != len(names):
            return None  # a recorded file is gone
        return subdirs

    def _push_dir(self, stack: Queue, rel: str, name: str, lv: Levels) -> None:
        """Queue subdirectory ``rel`` unless it is ignored (the store itself is never listed)."""
        probe = rel + "/"
        for level in reversed(lv):
            matcher = level.matcher
            if matcher.empty:
                continue
            v = matcher.verdict_name(name + "/" if matcher.basename_only
                                     else level.prefix + probe[level.strip:])
            if v is not None:
                if v:
                    return
                break
        stack.append((rel, lv))

    def _list_dir(self, stack: Queue, d: str, prefix: str,
                  ents: Listing, lv: Levels) -> None:
        """Examine every entry of directory ``d``: ignore rules, stat against the cache, and
        hashing of what the cache cannot vouch for; records the directory for ``_same_dir``."""
        old_get = self.old_rows.get
        make_row = self._row
        made = self.made
        index = self._index
        size_cap, threshold, taken = self.size_cap, self.threshold, 0
        # The rule levels in effect here, unpacked once per directory; the common case - one
        # level whose patterns all look at names only - gets a direct call.
        _live, single = _name_rules(lv)
        checks = [(lvl.strip, lvl.prefix, lvl.matcher.verdict_name, lvl.matcher.basename_only)
                  for lvl in reversed(lv) if not lvl.matcher.empty]
        # (regex match, group -> ignores) of a single name-only level, called inline below
        name_match = single.match if single is not None else None
        ignores_by_group = single.group_ignores if single is not None else {}
        known = single.name_cache if single is not None else {}
        mine: dict[str, CacheRow] = {}
        others: set[str] = set()  # files the rules excluded (no row)
        exact = True  # False: a name was skipped without a row, so _same_dir cannot vouch for it
        hits = 0
        for name, key in ents:
            if key is None:
                exact = False
                continue  # vanished between listing and stat
            mode = key[4]
            if name == ".git" and (not d or mode & 0o170000 == 0o040000):
                continue  # a repository's own (a .git FILE in a subfolder is content)
            rel = prefix + name
            if mode & 0o170000 == 0o040000:  # a directory (S_ISDIR without the call)
                self._push_dir(stack, rel, name, lv)
                continue
            if checks:
                if name_match is not None:
                    ig = known.get(name)
                    if ig is None:
                        m = name_match(name)
                        # every alternative of the combined pattern is a named group
                        ig = known[name] = m is not None and ignores_by_group[m.lastgroup or ""]
                    if ig:
                        others.add(name)
                        continue
                else:
                    ignored = False
                    for strip, pre, verdict, by_name in checks:
                        v = verdict(name if by_name else pre + rel[strip:])
                        if v is not None:
                            ignored = v
                            break
                    if ignored:
                        others.add(name)
                        continue
            row = old_get(rel)
            if row is not None and row[2] and row[0] == key:
                hits += 1
                mine[name] = row
                continue
            # A regular file whose stat matches git's index entry: the entry's blob id, unread
            # (``_row``'s first case, inlined: a cold capture of a clean checkout is all this).
            if index is None and not self._index_read and self.git is not None:
                index = self._git_index()
            if index is not None and mode & 0o170000 == 0o100000 and key[0] <= size_cap:
                vouched = index.row(rel, key, threshold)
                if vouched is not None:
                    taken += 1
                    mine[name] = vouched
                    continue
            mine[name] = made[rel] = make_row(rel, key)
        self._record_dir(d, lv, mine, others, exact, hits, taken)

    def found_rows(self) -> dict[str, CacheRow]:
        """Every stat-cache row this scan produced, by workspace-relative path."""
        out: dict[str, CacheRow] = {}
        for d, (_, names, _) in self.dirs.items():
            prefix = d + "/" if d else ""
            for name, row in names.items():
                out[prefix + name if name else d] = row  # '' : the empty directory d itself
        out.update(self.rows)  # a journal capture visits single paths after their trees: later wins
        return out

    def found_rows_and_parts(self) -> tuple[dict[str, CacheRow], dict[str, Entry], dict[str, str], bytes | None]:
        """``found_rows()`` and ``manifest_parts`` of them, in one pass over the walk's records
        (a cold capture of 100,000 files does not loop over them twice), and, when C made it,
        the JSON of the entries in key order (``TrackStore.put_manifest``'s ``entries_json``)."""
        if self.rows:
            rows = self.found_rows()
            return (rows, *manifest_parts(rows, self.extra_skipped), None)
        if _fast is not None:  # the same loop in C (``_fastwalk.rows_and_parts``: no GC-tracked tuples)
            done = _fast.rows_and_parts(self.dirs, dict(self.extra_skipped))
            if done is not None:
                return done
        out: dict[str, CacheRow] = {}
        entries: dict[str, Entry] = {}
        skipped = dict(self.extra_skipped)
        for d, (_, names, _) in self.dirs.items():
            prefix = d + "/" if d else ""
            for name, row in names.items():
                path = prefix + name if name else d  # '' : the empty directory d itself
                out[path] = row
                key, h, _trusted, target = row
                if h[0] == "!":
                    skipped[path] = h[1:]
                else:
                    entries[path] = (h, key[4], key[0], target)
        return out, entries, skipped, None

    # -- a path the journal names -----------------------------------------------------------
    def rescan(self, rel: str) -> None:
        """Capture ``rel`` as the full walk would: nothing if it or an ancestor is excluded."""
        parts = rel.split("/")
        if ".git" in parts[:-1] or rel == ".git":
            return
        levels = self._levels_inside(rel.rpartition("/")[0])
        if levels is None:
            return
        try:
            st = os.lstat(f"{self.ws}/{rel}")
        except OSError:
            return
        if parts[-1] == ".git" and st_mod.S_ISDIR(st.st_mode):
            return  # a nested repository's own; a .git FILE in a subfolder is content
        if st_mod.S_ISDIR(st.st_mode):
            if self.store_id is not None and (st.st_dev, st.st_ino) == self.store_id:
                return
            if not is_ignored(levels, rel, True):
                self.walk(rel, levels)
        elif not is_ignored(levels, rel, False):
            self.visit(rel, st)

    def _levels_inside(self, d: str) -> Levels | None:
        """Rule levels in effect for entries of directory ``d``, or None when the walk would
        never list it (an ancestor is ignored, is not a real directory, or is gone)."""
        cache = self._dir_levels
        if d in cache:
            return cache[d]
        levels: Levels | None
        if d == "":
            levels = self.rules.root_levels
        else:
            parent, _, name = d.rpartition("/")
            levels = self._levels_inside(parent)
            if levels is not None:
                try:
                    real_dir = st_mod.S_ISDIR(os.lstat(f"{self.ws}/{d}").st_mode)
                except OSError:
                    real_dir = False
                if not real_dir or name == ".git" or is_ignored(levels, d, True):
                    levels = None
        if levels is not None:
            own = self.rules.level_for_dir(d)
            if own is not None:
                levels = (*levels, own)
        cache[d] = levels
        return levels


class _Lister:
    """The listings of a walk's directories, a batch at a time in the order they were queued,
    listed on a background thread (``_fastwalk.list_dirs``) while the walk examines earlier ones.

    Listing is system calls (~1.7 us of kernel time per entry here) and examining is Python
    objects (the GIL): on two cores the two overlap instead of taking turns, and a batch of the
    next level is listed as soon as enough of its directories are known. ``on_dir`` (the
    watcher's) is still called, on the walk's thread, for every directory of a batch before that
    batch's listing starts, so no change after a listing goes unseen. Without the extension a
    batch carries no listings (the walk lists each directory itself, after ``on_dir``). At most
    ``_AHEAD`` batches are in flight, so at most that many batches' listings are in memory besides
    the one being examined."""

    def __init__(self, fast: ModuleType | None, ws: str, on_dir: OnDir | None, sdev: int, sino: int) -> None:
        self.fast, self.ws, self.on_dir, self.sdev, self.sino = fast, ws, on_dir, sdev, sino
        self.inflight: deque[tuple[list[tuple[str, Levels]], threading.Thread | None, list[object]]] = deque()

    def path(self, d: str) -> str:
        return f"{self.ws}/{d}" if d else self.ws

    def feed(self, queued: Queue, *, force: bool = False) -> None:
        """Start listing full batches of ``queued`` (taken out of it) while fewer than
        ``_AHEAD`` are in flight; ``force``: a last, partial one too."""
        while queued and len(self.inflight) < _AHEAD and (force or len(queued) >= _BATCH):
            self._start([queued.popleft() for _ in range(min(_BATCH, len(queued)))])

    def _start(self, batch: list[tuple[str, Levels]]) -> None:
        paths = [self.path(d) for d, _ in batch]
        if self.on_dir is not None:
            for (d, _), absd in zip(batch, paths):
                self.on_dir(absd, d)
        box: list[object] = []
        fast = self.fast
        if fast is None:
            self.inflight.append((batch, None, box))
            return
        sdev, sino, threads = self.sdev, self.sino, _THREADS if len(paths) > 1 else 1

        def run() -> None:
            try:
                box.append(fast.list_dirs(paths, sdev, sino, threads))
            except BaseException as exc:  # noqa: BLE001 - (MemoryError, an interrupt): raised again by ``take``
                box.append(exc)

        # one directory with nothing to overlap it with (a small tree, a journal's rescan) is
        # listed here, without the cost of a thread; so is any batch when no thread can be had
        if len(paths) > 1 or self.inflight:
            t = threading.Thread(target=run, name="iterion-list", daemon=True)
            try:
                t.start()
                self.inflight.append((batch, t, box))
                return
            except RuntimeError:  # a pids limit: listed here, not overlapped
                pass
        run()
        self.inflight.append((batch, None, box))

    def take(self) -> tuple[list[tuple[str, Levels]], list[bytes | None] | None] | None:
        """The oldest batch in flight and its listings (None: not listed here); None when no
        batch is in flight."""
        if not self.inflight:
            return None
        batch, t, box = self.inflight.popleft()
        if t is not None:
            t.join()
        elif not box:
            return batch, None  # not listed here (no extension)
        got = box[0]
        if isinstance(got, BaseException):
            raise got
        return batch, got  # type: ignore[return-value]


# ``_fastwalk.list_dirs``'s record header (rec_t): size, mtime, ctime, ino, mode, name length,
# state, padding; the name follows, zero-padded to 8 bytes
_REC = struct.Struct("=qqqQIHBB")


def _fingerprint(listing: bytes) -> str:
    """A directory's listing (``_fastwalk.list_dirs``'s records: every name with its lstat key,
    zero-padded, so equal listings are equal bytes) in 32 hex digits. A ``.git`` directory's
    record is left out: the walk never enters it, and git changes its times at every command."""
    if b".git\0" in listing:
        parts, pos, n = [], 0, len(listing)
        while pos + _REC.size <= n:
            _s, _m, _c, _i, mode, namelen, _st, _p = _REC.unpack_from(listing, pos)
            end = pos + ((_REC.size + namelen + 7) & ~7)
            name = listing[pos + _REC.size:pos + _REC.size + namelen]
            if not (name == b".git" and st_mod.S_ISDIR(mode)):
                parts.append(listing[pos:end])
            pos = end
        listing = b"".join(parts)
    return hashlib.blake2b(listing, digest_size=16).hexdigest()


def _name_rules(lv: Levels) -> tuple[list[Matcher], Matcher | None]:
    """The rule levels in effect in a directory, deepest first, and the one of them when it is
    the only one and looks at names only (the common case, matched by a direct call)."""
    live = [lvl.matcher for lvl in reversed(lv) if not lvl.matcher.empty]
    single = live[0] if len(live) == 1 and live[0].basename_only else None
    if single is not None and len(single.name_cache) > NAME_CACHE_MAX:
        single.name_cache.clear()
    return live, single

def manifest_parts(rows: dict[str, CacheRow], extra_skipped: dict[str, str]) -> tuple[dict[str, Entry], dict[str, str]]:
    """(entries, skipped) of a manifest from the stat rows of the capture that produced it."""
    entries: dict[str, Entry] = {}
    skipped = dict(extra_skipped)
    for path, (key, h, _trusted, target) in rows.items():
        if h[0] == "!":
            skipped[path] = h[1:]
        else:
            entries[path] = (h, key[4], key[0], target)
    return entries, skipped


def _entries(absd: str, store_dev: int, store_ino: int, listing: bytes | None,
             fast: ModuleType | None) -> tuple[Listing, bool]:
    """(Every entry of directory ``absd`` with its lstat key, whether the directory is empty):
    from ``listing`` (``_fastwalk.list_dirs``'s) when there is one, else listed here. The store's
    own directory (dev, ino) is left out of the entries, but a directory holding it is not
    empty. Raises OSError when the directory cannot be listed."""
    if listing is not None and fast is not None:
        out: Listing | None = fast.unpack(listing)
        if out is not None:
            return out, not listing
    # no listing (or a value C could not hold): the Python listing meets it, or raises
    out = []
    n = 0
    with os.scandir(absd) as it:
        for e in it:
            n += 1
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                out.append((e.name, None))
                continue
            mode = st.st_mode
            if mode & 0o170000 == 0o040000 and st.st_ino == store_ino and st.st_dev == store_dev:
                continue
            out.append((e.name, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, mode)))
    return out, n == 0
