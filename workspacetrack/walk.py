"""The stat walk: list the workspace, re-hash only what the stat cache cannot vouch for.

A file is re-read when its (size, mtime_ns, ctime_ns, inode, mode) differs from the cached row,
or when its row is "racily clean": a file whose timestamps fall within RACY_WINDOW_NS of the
capture that hashed it could be rewritten within the same timestamp tick without its stat
changing, so its row is kept but not trusted (git's racy-index rule, with a wide margin for
coarse filesystem clocks).
"""

from __future__ import annotations

import os
import stat as st_mod
import time
from collections.abc import Callable

from workspacetrack.ignore import RULE_FILES, IgnoreRules, Levels, is_ignored
from workspacetrack.models import (
    SKIP_OVERSIZED,
    SKIP_SPECIAL,
    SKIP_UNENCODABLE,
    SKIP_UNREADABLE,
    CacheRow,
    Entry,
)
from workspacetrack.objects import ObjectStore, digest_of

RACY_WINDOW_NS = 2_000_000_000
NAME_CACHE_MAX = 500_000  # bound on remembered ignore verdicts per rule file
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

OnDir = Callable[[str, str], None]  # (absolute dir, workspace-relative dir)


def _encodable(name: str) -> bool:
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


class Scan:
    """One capture's view of the workspace: entries, skipped paths and the new stat-cache rows."""

    def __init__(self, workspace: str, rules: IgnoreRules, objects: ObjectStore, size_cap: int,
                 old_rows: dict[str, CacheRow], store_id: tuple[int, int] | None,
                 on_dir: OnDir | None = None) -> None:
        self.ws = workspace
        self.rules = rules
        self.objects = objects
        self.size_cap = size_cap
        self.old_rows = old_rows
        self.store_id = store_id
        self.on_dir = on_dir
        # The walk records only stat-cache rows (a row holds everything a manifest entry needs);
        # entries are derived from them only when the manifest has to be written.
        self.rows: dict[str, CacheRow] = {}
        self.extra_skipped: dict[str, str] = {}  # skipped without a stat row (unencodable, unlistable)
        self.hits = 0      # paths vouched for by a trusted cache row
        self.hashed = 0    # files (or link targets) actually read
        self.threshold = time.time_ns() - RACY_WINDOW_NS
        self._dir_levels: dict[str, Levels | None] = {}

    # -- one path ---------------------------------------------------------------------------
    def visit(self, rel: str, st: os.stat_result) -> None:
        mode = st.st_mode
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, mode)
        row = self.old_rows.get(rel)
        if row is not None and row[2] and row[0] == key:
            self.hits += 1
            self.rows[rel] = row
            return
        trusted = max(st.st_mtime_ns, st.st_ctime_ns) < self.threshold
        absp = f"{self.ws}/{rel}"
        if st_mod.S_ISLNK(mode):
            try:
                target = os.readlink(absp)
            except OSError:
                self._skip(rel, key, SKIP_UNREADABLE, False)
                return
            raw = os.fsencode(target)
            h = self.objects.put(raw)
            self.hashed += 1
            self.rows[rel] = (key, h, trusted, target)
        elif st_mod.S_ISREG(mode):
            if st.st_size > self.size_cap:
                self._skip(rel, key, SKIP_OVERSIZED, trusted)
                return
            try:
                fd = os.open(absp, _READ_FLAGS)
            except OSError:
                self._skip(rel, key, SKIP_UNREADABLE, False)
                return
            try:
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
                self._skip(rel, key, SKIP_OVERSIZED, False)
                return
            data = b"".join(chunks)
            h = self.objects.put(data, digest_of(data))
            self.hashed += 1
            # The row's stat is from before the read: a write racing the read changes the stat,
            # so the next capture re-reads rather than trusting this hash.
            self.rows[rel] = (key, h, trusted, None)
        else:
            self._skip(rel, key, SKIP_SPECIAL, True)

    def _skip(self, rel: str, key: tuple[int, int, int, int, int], reason: str, trusted: bool) -> None:
        self.rows[rel] = (key, "!" + reason, trusted, None)

    # -- a directory tree -------------------------------------------------------------------
    def walk(self, start: str, levels: Levels) -> None:
        """Capture everything under workspace-relative directory ``start`` ('' = the root)."""
        ws = self.ws
        rules = self.rules
        store_id = self.store_id
        visit = self.visit
        on_dir = self.on_dir
        old_get = self.old_rows.get
        rows = self.rows
        hits = 0
        stack: list[tuple[str, Levels]] = [(start, levels)]
        while stack:
            d, lv = stack.pop()
            absd = f"{ws}/{d}" if d else ws
            if on_dir is not None:
                on_dir(absd, d)
            try:
                with os.scandir(absd) as it:
                    ents = list(it)
            except OSError:
                if d:
                    self.extra_skipped[d] = SKIP_UNREADABLE
                continue
            for e in ents:
                if e.name in RULE_FILES:
                    added = rules.level_for_dir(d, {e.name})
                    if added is not None:
                        lv = (*lv, added)
                    break
            # The rule levels in effect here, deepest first, unpacked once per directory; the
            # common case - one level whose patterns all look at names only - gets a direct call.
            live = [lvl.matcher for lvl in reversed(lv) if not lvl.matcher.empty]
            checks = [(lvl.strip, lvl.prefix, lvl.matcher.verdict_name, lvl.matcher.basename_only)
                      for lvl in reversed(lv) if not lvl.matcher.empty]
            # (regex match, group -> ignores) of a single name-only level, called inline below
            single = live[0] if len(live) == 1 and live[0].basename_only else None
            name_match = single.match if single is not None else None
            ignores_by_group = single.group_ignores if single is not None else {}
            known = single.name_cache if single is not None else {}
            if len(known) > NAME_CACHE_MAX:
                known.clear()
            prefix = d + "/" if d else ""
            for e in ents:
                name = e.name
                if name == ".git":
                    continue
                rel = prefix + name
                if not name.isascii() and not _encodable(name):
                    self.extra_skipped[rel] = SKIP_UNENCODABLE
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished between listing and stat
                mode = st.st_mode
                if mode & 0o170000 == 0o040000:  # a directory (S_ISDIR without the call)
                    if store_id is not None and (st.st_dev, st.st_ino) == store_id:
                        continue
                    if checks:
                        if name_match is not None:
                            probe = name + "/"
                            ig = known.get(probe)
                            if ig is None:
                                m = name_match(probe)
                                ig = known[probe] = m is not None and ignores_by_group[m.lastgroup]
                            if ig:
                                continue
                        else:
                            probe = rel + "/"
                            ignored = False
                            for strip, pre, verdict, by_name in checks:
                                v = verdict(name + "/" if by_name else pre + probe[strip:])
                                if v is not None:
                                    ignored = v
                                    break
                            if ignored:
                                continue
                    stack.append((rel, lv))
                    continue
                if checks:
                    if name_match is not None:
                        ig = known.get(name)
                        if ig is None:
                            m = name_match(name)
                            ig = known[name] = m is not None and ignores_by_group[m.lastgroup]
                        if ig:
                            continue
                    else:
                        ignored = False
                        for strip, pre, verdict, by_name in checks:
                            v = verdict(name if by_name else pre + rel[strip:])
                            if v is not None:
                                ignored = v
                                break
                        if ignored:
                            continue
                row = old_get(rel)
                if row is not None and row[2] and row[0] == (st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                                             st.st_ino, mode):
                    hits += 1
                    rows[rel] = row
                else:
                    visit(rel, st)
        self.hits += hits

    # -- a path the journal names -----------------------------------------------------------
    def rescan(self, rel: str) -> None:
        """Capture ``rel`` as the full walk would: nothing if it or an ancestor is excluded."""
        parts = rel.split("/")
        if ".git" in parts:
            return
        levels = self._levels_inside(rel.rpartition("/")[0])
        if levels is None:
            return
        if not _encodable(parts[-1]):
            self.extra_skipped[rel] = SKIP_UNENCODABLE
            return
        try:
            st = os.lstat(f"{self.ws}/{rel}")
        except OSError:
            return
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
