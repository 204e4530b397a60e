"""The change journal: inotify watches (workspacetrack/inotify.py) on the workspace.

While a run is live it records which paths changed, so a capture re-examines only those. It is
read synchronously: a capture drains the inotify queue itself, and the kernel queues an event
before the write that caused it returns, so every change made before the capture started is in
the drained set. (watchdog's Observer delivers events on its own threads, later; a capture
could not tell whether a write made just before it had been delivered yet.)

Trust is all-or-nothing: after a queue overflow, a watch that could not be added, a reader
thread that died, or too many paths, the journal reports itself untrusted and the capture falls
back to the full stat walk. It is never persisted: a new process always starts with a walk.
"""

from __future__ import annotations

import errno
import os
import select
import threading

from workspacetrack import inotify

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000

_MASK = (IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
         | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
_TREE_EVENTS = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO

MAX_PATHS = 200_000  # past this a walk is cheaper than the journal anyway


class Journal:
    def __init__(self, workspace: str) -> None:
        self.workspace = workspace
        self._lock = threading.Lock()
        self._fd = -1
        self._wd_path: dict[int, str] = {}   # wd -> workspace-relative dir ('' = root)
        self._path_wd: dict[str, int] = {}
        self.dirty: set[str] = set()
        self.dirty_trees: set[str] = set()
        self.broken: str | None = "not started"
        self._stop = False
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1

    @property
    def available(self) -> bool:
        return inotify.available()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if not self.available or self._fd >= 0:
            return
        try:
            fd = inotify.init()
        except OSError as exc:
            self.broken = f"inotify_init failed: {exc.strerror}"
            return
        self._fd = fd
        self._wake_r, self._wake_w = os.pipe()
        # Untrusted until the next full walk has put a watch on every directory it listed.
        self.broken = "no baseline yet"
        self._stop = False
        self._thread = threading.Thread(target=self._reader, name="iterion-track-journal", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._fd < 0:
            return
        self._stop = True
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            os.close(self._fd)
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._fd = -1
            self._wd_path.clear()
            self._path_wd.clear()
            self.dirty.clear()
            self.dirty_trees.clear()
            self.broken = "stopped"

    @property
    def active(self) -> bool:
        return self._fd >= 0

    def mark_untrusted(self, reason: str) -> None:
        with self._lock:
            self.broken = reason

    # -- what a capture calls -----------------------------------------------------------------
    def trusted(self) -> bool:
        if self._fd < 0:
            return False
        if self._thread is None or not self._thread.is_alive():
            self.broken = self.broken or "reader thread died"
        return self.broken is None

    def begin_walk(self) -> None:
        """A full walk starts: pending events describe the past the walk is about to re-list."""
        with self._lock:
            if self._fd < 0:
                return
            self._read_all()
            self.dirty.clear()
            self.dirty_trees.clear()
            self.broken = None

    def arm(self) -> None:
        """Watch every directory of the workspace now (what a walk does as it goes), for a
        caller whose own baseline is taken right AFTER this returns (a worktree boundary's full
        ``git add -A``): every change from here on is journaled, every earlier one is in that
        baseline. ``.git`` directories are not entered (a nested one makes the caller re-verify
        anyway)."""
        self.begin_walk()
        stack = [""]
        while stack:
            rel = stack.pop()
            absd = f"{self.workspace}/{rel}" if rel else self.workspace
            self.watch_dir(absd, rel)
            try:
                with os.scandir(absd) as it:
                    for e in it:
                        if e.name != ".git" and e.is_dir(follow_symlinks=False):
                            stack.append(f"{rel}/{e.name}" if rel else e.name)
            except OSError:
                continue  # gone, or unreadable: its parent's watch reports what happens to it

    def watch_dir(self, abs_dir: str, rel_dir: str) -> None:
        """Called by the walk BEFORE it lists a directory, so no change to it can fall between."""
        if self._fd < 0:
            return
        wd = inotify.add_watch(self._fd, os.fsencode(abs_dir), _MASK)
        with self._lock:
            if wd < 0:
                err = inotify.last_errno()
                if err not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                    self.broken = f"cannot watch {rel_dir or '.'}: {os.strerror(err)}"
                return
            old = self._wd_path.get(wd)
            if old is not None and old != rel_dir:
                self._path_wd.pop(old, None)
            self._wd_path[wd] = rel_dir
            self._path_wd[rel_dir] = wd

    def drain(self) -> tuple[set[str], set[str]]:
        """Every path changed since the last drain/walk: (paths, directory trees)."""
        with self._lock:
            self._read_all()
            dirty, trees = self.dirty, self.dirty_trees
            self.dirty, self.dirty_trees = set(), set()
            return dirty, trees

    # -- internals ------------------------------------------------------------------------------
    def _reader(self) -> None:
        """Keep the kernel queue short while a node runs (its overflow would cost a full walk)."""
        try:
            while not self._stop:
                r, _, _ = select.select([self._fd, self._wake_r], [], [], 1.0)
                if self._stop:
                    return
                if self._fd in r:
                    with self._lock:
                        if self._fd >= 0:
                            self._read_all()
        except Exception as exc:  # noqa: BLE001 - a dead reader must make the journal untrusted
            self.broken = f"reader thread died: {exc}"

    def _read_all(self) -> None:
        while True:
            try:
                buf = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                self.broken = f"inotify read failed: {exc}"
                return
            if not buf:
                return
            for wd, mask, _cookie, name in inotify.parse_events(buf):
                self._on_event(wd, mask, os.fsdecode(name))

    def _on_event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.broken = "inotify queue overflowed"
            return
        base = self._wd_path.get(wd)
        if base is None:
            return  # a watch already forgotten (moved or deleted directory)
        if mask & IN_IGNORED or mask & IN_DELETE_SELF or mask & IN_MOVE_SELF:
            if base == "" and not mask & IN_IGNORED:
                self.broken = "the workspace directory itself was moved or deleted"
            if mask & IN_IGNORED or mask & IN_DELETE_SELF:
                self._forget(wd)
            return
        if not name:
            return
        if base == "" and name == ".git":
            return
        rel = f"{base}/{name}" if base else name
        if mask & IN_ISDIR and mask & _TREE_EVENTS:
            self.dirty_trees.add(rel)
            if mask & (IN_MOVED_FROM | IN_DELETE):
                self._forget_tree(rel)
            else:
                self._watch_new_tree(rel)
        else:
            self.dirty.add(rel)
        if len(self.dirty) + len(self.dirty_trees) > MAX_PATHS:
            self.broken = f"more than {MAX_PATHS} changed paths"

    def _forget(self, wd: int) -> None:
        path = self._wd_path.pop(wd, None)
        if path is not None and self._path_wd.get(path) == wd:
            del self._path_wd[path]

    def _forget_tree(self, rel: str) -> None:
        """A directory moved away or deleted: its watches no longer describe paths under ``rel``."""
        prefix = rel + "/"
        for path in [p for p in self._path_wd if p == rel or p.startswith(prefix)]:
            wd = self._path_wd.pop(path)
            self._wd_path.pop(wd, None)
            inotify.rm_watch(self._fd, wd)

    def _watch_new_tree(self, rel: str) -> None:
        """Watch a directory that appeared (and everything in it); the capture re-lists it whole."""
        stack = [rel]
        while stack:
            d = stack.pop()
            absd = f"{self.workspace}/{d}"
            wd = inotify.add_watch(self._fd, os.fsencode(absd), _MASK)
            if wd < 0:
                continue  # gone already, or not a directory (a symlink): its parent's event covers it
            self._wd_path[wd] = d
            self._path_wd[d] = wd
            try:
                with os.scandir(absd) as it:
                    for e in it:
                        if e.name != ".git" and e.is_dir(follow_symlinks=False):
                            stack.append(f"{d}/{e.name}")
            except OSError:
                continue
