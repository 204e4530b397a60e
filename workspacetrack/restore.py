"""Restore with a scope: plan against the pivot, the last boundary and the banked disk state,
then write through directory file descriptors so no write can leave the workspace.

Every directory on the way to a path is opened with O_NOFOLLOW relative to its parent's fd, so
a symlink anywhere on the path is met, not followed (and a rename racing the restore cannot
redirect it). Paths come from manifests and are re-checked by ``check_relpath``: '..' cannot
occur.

Durability: the caller commits the bank (the disk state about to be changed) durably BEFORE
``apply_restore`` writes anything, and the pivot's content is durable in the store already. The
writes themselves are not fsynced one by one as they happen (that cost dominated a restore's
wall time): each file is still replaced by an atomic rename, and the batch is made durable at
the end, before the report is returned, by syncing exactly the files written and the directories
whose entries changed, concurrently (``gitrefs.persist.sync_paths``; never ``syncfs``, which would wait
for every other process's unflushed writes too). A crash mid-restore can therefore
leave any written path old or new (or, on a filesystem that does not order data before a
rename, empty); both the target and the pre-restore state are durable in the store, so running
the restore again, or undoing it from the bank, repairs every such path.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat as st_mod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import Field

from gitrefs.persist import VersionedModel, sync_paths
from gitrefs.persist.killpoint import kill_point
from workspacetrack.bigfiles import STREAM_MIN
from workspacetrack.changes import changed_paths
from workspacetrack.errors import TrackError
from workspacetrack.ignore import IgnoreRules
from workspacetrack.models import EMPTY_DIR, Entry, Manifest, SkipReason
from workspacetrack.names import from_wire, to_wire
from workspacetrack.objects import ObjectStore
from workspacetrack.paths import check_relpath, parent_dirs

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Scope(StrEnum):
    PRODUCED = "produced"
    FULL = "full"
    NONE = "none"


@dataclass(frozen=True)
class Action:
    path: str
    target: Entry | None        # None: remove the path
    overwrites: bool            # disk content matched neither the pivot nor the last boundary


@dataclass
class Plan:
    scope: Scope
    scope_paths: int
    actions: list[Action] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    left_in_place: list[str] = field(default_factory=list)


@dataclass
class RestoreReport:
    pivot: str
    scope: str
    bank: str | None
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)   # {"path", "reason"}
    overwritten: list[str] = field(default_factory=list)
    left_in_place: list[str] = field(default_factory=list)
    scope_empty: bool = False
    message: str = ""
    mechanism: str = "workspacetrack"

    def to_json(self) -> dict[str, object]:
        return {
            "mechanism": self.mechanism, "pivot": self.pivot, "scope": self.scope, "bank": self.bank,
            "scope_empty": self.scope_empty, "message": self.message, "restored": self.restored,
            "removed": self.removed, "skipped": self.skipped, "overwritten": self.overwritten,
            "left_in_place": self.left_in_place,
        }


def _same(a: Entry | None, b: Entry | None) -> bool:
    if a is None or b is None:
        return a is b
    return a[0] == b[0] and a[1] == b[1]


def _is_protected(path: str, protected: set[str]) -> bool:
    return path in protected or any(path.startswith(p.rstrip("/") + "/") for p in protected)


def plan_restore(workspace: Path, rules: IgnoreRules, target: Manifest, last: Manifest | None,
                 current: Manifest, scope: Scope, produced: frozenset[str],
                 protected: set[str], drifted: set[str] | None = None, *,
                 target_full: Callable[[], Manifest] | None = None) -> Plan:
    """Decide every path's fate. ``last`` None: no recorded range (undo) - nothing is 'overwritten'.

    ``drifted``: when known, every path whose state differs between ``last`` and ``current``
    (``changed_paths`` of the two, without diffing two whole manifests). ``target_full``: the
    target holds the entries of the scope's paths alone (``TrackStore.read_manifest_paths``);
    this gives all of them, for the one question about the whole state (an emptied directory)."""
    if scope is Scope.NONE:
        paths: set[str] = set()
    elif scope is Scope.PRODUCED:
        paths = set(produced)
    else:
        paths = set(target.entries) | set(produced) | (set(last.entries) if last is not None else set())
    plan = Plan(scope=scope, scope_paths=len(paths))
    target_dirs: set[str] | None = None
    for path in sorted(paths):
        check_relpath(path)
        t, c = target.entries.get(path), current.entries.get(path)
        if _is_protected(path, protected):
            plan.skipped[path] = SkipReason.PROTECTED
            continue
        if SkipReason.OVERSIZED in (target.skipped.get(path), current.skipped.get(path),
                              last.skipped.get(path) if last is not None else None):
            plan.skipped[path] = SkipReason.OVERSIZED
            continue
        if path in current.skipped:
            plan.skipped[path] = current.skipped[path]
            continue
        if c is None:
            link = _link_on_path(workspace, path)
            if link is not None:
                plan.skipped[path] = link
                continue
        if c is None and rules.ignores(path):
            why = rules.explain(path)
            plan.skipped[path] = f"{SkipReason.IGNORED} ({why})" if why else SkipReason.IGNORED
            continue
        if _same(t, c):
            continue
        if t is None and c is not None and c[0] == EMPTY_DIR:
            if target_dirs is None:
                whole = target_full() if target_full is not None else target
                target_dirs = {d for p in whole.entries for d in parent_dirs(p)}
            if path in target_dirs:
                continue  # an emptied directory the pivot's files go back into: not a removal
        was = last.entries.get(path) if last is not None else c
        overwrites = c is not None and not _same(c, was)
        plan.actions.append(Action(path, t, overwrites))
    if scope is not Scope.NONE:
        # Over the size limit, a file's changes are invisible to the manifests (it stays
        # "oversized" whatever its content): it may well be the run's, so it is named, never
        # silently left out.
        for m in (target, current, last):
            for path, reason in (m.skipped.items() if m is not None else ()):
                if reason == SkipReason.OVERSIZED and not _is_protected(path, protected):
                    plan.skipped.setdefault(path, SkipReason.OVERSIZED)
    if last is not None:
        moved = changed_paths(last, current) if drifted is None else drifted
        plan.left_in_place = sorted(p for p in moved if p not in paths)
    return plan


def _link_on_path(workspace: Path, path: str) -> str | None:
    """Reason to refuse ``path`` when one of its directories is a symlink (the walk never enters one)."""
    for d in parent_dirs(path):
        p = workspace / d
        try:
            if not p.is_symlink():
                continue
        except OSError:
            return None
        return SkipReason.SYMLINK_IN_PATH if p.resolve().is_relative_to(workspace) else SkipReason.SYMLINK_ESCAPE
    return None


class _Refused(Exception):
    """A planned write or removal that cannot be done safely: the path is skipped for ``reason``."""

    def __init__(self, reason: SkipReason) -> None:
        super().__init__(reason)
        self.reason = reason


class _Writer:
    """Writes under one workspace root fd; every path component is opened without following links."""

    def __init__(self, workspace: Path) -> None:
        self.ws = workspace
        self.root = os.open(workspace, _DIR_FLAGS)
        # what ``sync`` must make durable: files written, directories whose entries changed
        self._files: set[str] = set()
        self._dirs: set[str] = set()

    def close(self) -> None:
        os.close(self.root)

    def _note(self, dir_fd: int, rel_dir: str) -> None:
        self._dirs.add(rel_dir or ".")

    def sync(self) -> None:
        """Make every write and removal so far durable: the files' data, then the directories."""
        # the journal-commit probe is named like a restore temp: a crash leaves nothing unknown
        sync_paths(self._files, self._dirs, dir_fd=self.root, dummy_prefix=RESTORE_TMP_MARK + "sync")
        self._files.clear()
        self._dirs.clear()

    def _link_reason(self, dir_fd: int, name: str, rel_dir: str) -> SkipReason:
        target = os.readlink(name, dir_fd=dir_fd)
        base = self.ws / rel_dir if rel_dir else self.ws
        resolved = (base / target).resolve()
        return SkipReason.SYMLINK_IN_PATH if resolved.is_relative_to(self.ws) else SkipReason.SYMLINK_ESCAPE

    def open_parent(self, path: str, create: bool) -> int | None:
        """fd of ``path``'s directory (created if ``create``), None if it does not exist."""
        fd = os.dup(self.root)
        parts = path.split("/")
        try:
            for i, comp in enumerate(parts[:-1]):
                try:
                    nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(comp, 0o755, dir_fd=fd)
                    self._dirs.add("/".join(parts[:i]) or ".")  # the new name must last too
                    nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    st = os.stat(comp, dir_fd=fd, follow_symlinks=False)
                    if st_mod.S_ISLNK(st.st_mode):
                        raise _Refused(self._link_reason(fd, comp, "/".join(parts[:i]))) from None
                    raise _Refused(SkipReason.BLOCKED) from None
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _check_final(self, dir_fd: int, name: str, rel_dir: str) -> os.stat_result | None:
        """lstat of the final component. A symlink there (a node replaced a file by a link, to
        anywhere) is no obstacle: unlink and rename act on the link itself, never its target."""
        try:
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def remove(self, path: str) -> bool:
        fd = self.open_parent(path, create=False)
        if fd is None:
            return False
        name = path.rsplit("/", 1)[-1]
        rel_dir = path.rpartition("/")[0]
        try:
            st = self._check_final(fd, name, rel_dir)
            if st is None:
                return False
            self._note(fd, rel_dir)
            if st_mod.S_ISDIR(st.st_mode):
                try:
                    os.rmdir(name, dir_fd=fd)  # an empty directory the pivot did not have
                except OSError:
                    raise _Refused(SkipReason.BLOCKED) from None
                return True
            os.unlink(name, dir_fd=fd)
            return True
        finally:
            os.close(fd)

    def write(self, path: str, entry: Entry, objects: ObjectStore) -> None:
        fd = self.open_parent(path, create=True)
        assert fd is not None
        name = path.rsplit("/", 1)[-1]
        rel_dir = path.rpartition("/")[0]
        # Short and fixed-length: a 255-byte name must not make its temporary name too long.
        tmp = f".iterion-restore.{secrets.token_hex(8)}.tmp"
        try:
            st = self._check_final(fd, name, rel_dir)
            mode = entry[1]
            if st_mod.S_ISDIR(mode):
                self._note(fd, rel_dir)
                _make_dir(fd, name, st, mode)
                return
            if st is not None and st_mod.S_ISDIR(st.st_mode) and not _remove_empty_tree(fd, name):
                raise _Refused(SkipReason.BLOCKED)
            self._note(fd, rel_dir)
            if st_mod.S_ISLNK(mode):
                os.symlink(entry[3] or os.fsdecode(objects.read(entry[0])), tmp, dir_fd=fd)
            else:
                wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                              0o600, dir_fd=fd)
                try:
                    try:
                        if entry[2] >= STREAM_MIN:
                            objects.copy_to(entry[0], wfd)  # streamed, holes kept, verified
                        else:
                            view = memoryview(objects.read(entry[0]))
                            while view:
                                view = view[os.write(wfd, view):]
                        os.fchmod(wfd, st_mod.S_IMODE(mode))  # no fsync: apply_restore syncs the batch
                    finally:
                        os.close(wfd)
                except BaseException:
                    os.unlink(tmp, dir_fd=fd)
                    raise
            try:
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                if not st_mod.S_ISLNK(mode):
                    self._files.add(path)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=fd)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)


class _DryWriter(_Writer):
    """The dry run's writer: walks every path exactly as ``_Writer`` does and refuses what it
    would refuse (a link on the path, content in the way), but creates, writes and removes
    nothing. Removals are remembered so a directory they would empty counts as empty."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        self._gone: set[str] = set()

    def sync(self) -> None:
        self._files.clear()
        self._dirs.clear()

    def open_parent(self, path: str, create: bool) -> int | None:
        return super().open_parent(path, create=False)  # a missing directory would be made: no obstacle

    def _empty(self, dir_fd: int, name: str, rel: str) -> bool:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            return False
        try:
            with os.scandir(fd) as it:
                for child in it:
                    sub = f"{rel}/{child.name}"
                    if sub in self._gone:
                        continue
                    if not child.is_dir(follow_symlinks=False) or not self._empty(fd, child.name, sub):
                        return False
        finally:
            os.close(fd)
        return True

    def remove(self, path: str) -> bool:
        fd = self.open_parent(path, create=False)
        if fd is None:
            return False
        try:
            st = self._check_final(fd, path.rsplit("/", 1)[-1], path.rpartition("/")[0])
            if st is None:
                return False
            if st_mod.S_ISDIR(st.st_mode) and not self._empty(fd, path.rsplit("/", 1)[-1], path):
                raise _Refused(SkipReason.BLOCKED)
            self._gone.add(path)
            return True
        finally:
            os.close(fd)

    def write(self, path: str, entry: Entry, objects: ObjectStore) -> None:
        fd = self.open_parent(path, create=False)
        if fd is None:
            return
        try:
            name = path.rsplit("/", 1)[-1]
            st = self._check_final(fd, name, path.rpartition("/")[0])
            if st_mod.S_ISDIR(entry[1]):
                return
            if st is not None and st_mod.S_ISDIR(st.st_mode) and not self._empty(fd, name, path):
                raise _Refused(SkipReason.BLOCKED)
        finally:
            os.close(fd)


def _make_dir(dir_fd: int, name: str, st: os.stat_result | None, mode: int) -> None:
    """Recreate directory ``name`` (an empty directory the pivot had); a file or link standing
    there is removed first (it is in scope: the plan chose to put the directory back)."""
    if st is not None and not st_mod.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        st = None
    if st is None:
        os.mkdir(name, 0o700, dir_fd=dir_fd)
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        os.fchmod(fd, st_mod.S_IMODE(mode))
    finally:
        os.close(fd)


def _remove_empty_tree(dir_fd: int, name: str) -> bool:
    """Remove directory ``name`` if it holds nothing but (nested) empty directories.

    Emptied directories are left in place by a restore, so a file the pivot had where a
    directory now stands may meet an empty one: that is not content in the way.
    """
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        with os.scandir(fd) as it:
            for child in it:
                if not child.is_dir(follow_symlinks=False) or not _remove_empty_tree(fd, child.name):
                    return False
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except OSError:
        return False
    return True


def apply_restore(workspace: Path, objects: ObjectStore, plan: Plan, *, pivot: str,
                  bank: str | None, dry_run: bool = False) -> RestoreReport:
    """Carry out ``plan``; with ``dry_run``, the same walk and the same report with nothing written
    (``_DryWriter``), so a preview names exactly what the restore would restore, remove, skip
    and overwrite."""
    report = RestoreReport(pivot=pivot, scope=plan.scope.value, bank=bank,
                           left_in_place=list(plan.left_in_place))
    skipped = dict(plan.skipped)
    writer = _DryWriter(workspace) if dry_run else _Writer(workspace)
    try:
        removals = sorted((a for a in plan.actions if a.target is None), key=lambda a: a.path, reverse=True)
        for a in removals:
            try:
                if writer.remove(a.path):
                    report.removed.append(a.path)
                    if a.overwrites:
                        report.overwritten.append(a.path)
            except _Refused as r:
                skipped[a.path] = r.reason
            kill_point("restore")  # test-only fault injection (gitrefs/persist/killpoint.py)
        # Emptied directories stay: manifests record files, not directories, so an empty
        # directory an earlier node made (`mkdir -p out`) cannot be told from one a dropped node
        # made; removing it would break the replay of every node that writes into it.
        for a in plan.actions:
            if a.target is None:
                continue
            try:
                writer.write(a.path, a.target, objects)
                report.restored.append(a.path)
                if a.overwrites:
                    report.overwritten.append(a.path)
            except _Refused as r:
                skipped[a.path] = r.reason
            kill_point("restore")
    finally:
        writer.sync()  # the batch durable at once, before anyone is told it is done
        writer.close()
    report.removed.sort()
    report.overwritten.sort()
    report.skipped = [{"path": p, "reason": r} for p, r in sorted(skipped.items())]
    if plan.scope is Scope.NONE:
        report.message = "restore scope is none: nothing restored"
    elif plan.scope_paths == 0:
        report.scope_empty = True
        report.message = f"nothing to restore: the run recorded no change to any path after {pivot}"
    elif not report.restored and not report.removed:
        report.message = "every path in scope already matches the pivot (or was skipped): nothing written"
    else:
        report.message = (f"restored {len(report.restored)}, removed {len(report.removed)}, "
                          f"skipped {len(report.skipped)} of {plan.scope_paths} path(s) in scope")
    return report


# --- a restore planned ahead, recorded, and applied (again) from the record -------------------
#
# ``iterion rewind`` plans a restore, checks that every object it needs is present, records the
# plan (its intent record, iterion/rewind/intent.py) and only then writes. If the process dies
# mid-way, the next rewind applies the SAME plan again: every step is idempotent (a write
# replaces the path with the recorded content, a removal of an absent path is a no-op, the temp
# file a killed write left is removed first), so re-applying converges on the tree a clean
# restore produces, whatever subset of the plan had landed.

RESTORE_TMP_MARK = ".iterion-restore."


def is_restore_temp(name: str) -> bool:
    """A temp file a write of ``_Writer`` creates before its rename (a killed write leaves one)."""
    return name.startswith(".") and RESTORE_TMP_MARK in name and name.endswith(".tmp")


# (path, entry to write or None to remove, overwrites): rows, not models, so a 20,000-path
# plan loads in one pass of pydantic's core
PlannedAction = tuple[str, Entry | None, bool]


class PlannedRestore(VersionedModel):
    """A restore decided and banked, not necessarily applied: what a rewind's intent records."""

    FORMAT_VERSION = 1
    pivot: str                 # the label (or bank id, for an undo) restored to
    scope: Scope
    scope_paths: int
    bank: str | None = None    # the snapshot holding the disk state before the first write
    actions: list[PlannedAction] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)
    left_in_place: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, plan: Plan, *, pivot: str, bank: str | None) -> PlannedRestore:
        # paths in wire form: a name that is not UTF-8 survives JSON (workspacetrack/names.py)
        return cls(pivot=pivot, scope=plan.scope, scope_paths=plan.scope_paths, bank=bank,
                   actions=[(to_wire(a.path), a.target, a.overwrites) for a in plan.actions],
                   skipped={to_wire(k): v for k, v in plan.skipped.items()},
                   left_in_place=[to_wire(p) for p in plan.left_in_place])

    def plan(self) -> Plan:
        return Plan(scope=self.scope, scope_paths=self.scope_paths,
                    actions=[Action(from_wire(path), target, overwrites) for path, target, overwrites in self.actions],
                    skipped={from_wire(k): v for k, v in self.skipped.items()},
                    left_in_place=[from_wire(p) for p in self.left_in_place])


class MissingObjectsError(TrackError):
    """Objects a restore must read are missing or corrupt: refused before anything is written."""

    def __init__(self, bad: list[tuple[str, str, str]]) -> None:
        path, _digest, problem = bad[0]
        more = f" (and {len(bad) - 1} more path(s))" if len(bad) > 1 else ""
        super().__init__(f"the snapshot store cannot restore {path}{more}: {problem}",
                         hint="the store is damaged; nothing was changed")
        self.bad = bad


def missing_objects(objects: ObjectStore, target: Manifest, paths: Iterable[str]) -> list[tuple[str, str]]:
    """(path, object id) of every ``paths`` entry of ``target`` whose content object is absent.

    A superset of what any restore to ``target`` over ``paths`` reads; checked before the disk
    is even scanned, so a damaged store refuses with nothing changed anywhere.
    """
    out: list[tuple[str, str]] = []
    for path in sorted(set(paths)):
        entry = target.entries.get(path)
        if entry is not None and entry[0] != EMPTY_DIR and not objects.has(entry[0]):
            out.append((path, entry[0]))
    return out


def unreadable_objects(objects: ObjectStore, plan: Plan) -> list[tuple[str, str, str]]:
    """(path, object id, problem) of every write of ``plan`` whose object cannot be read intact."""
    out: list[tuple[str, str, str]] = []
    seen: dict[str, str | None] = {}
    for a in plan.actions:
        if a.target is None or a.target[0] == EMPTY_DIR:  # an empty directory reads no object
            continue
        digest = a.target[0]
        if digest not in seen:
            try:
                objects.read(digest)
                seen[digest] = None
            except (TrackError, OSError) as exc:
                seen[digest] = str(getattr(exc, "message", None) or exc)
        problem = seen[digest]
        if problem is not None:
            out.append((a.path, digest, problem))
    return out


def _remove_temp_leftovers(writer: _Writer, plan: Plan) -> None:
    """Remove the temp files killed writes left in the directories ``plan`` writes into."""
    dirs = {a.path.rpartition("/")[0]: a.path for a in plan.actions if a.target is not None}
    for probe in dirs.values():
        try:
            fd = writer.open_parent(probe, create=False)
        except (_Refused, OSError):
            continue  # refused again by the write itself, with its reason
        if fd is None:
            continue
        try:
            with os.scandir(fd) as it:
                names = [e.name for e in it if is_restore_temp(e.name) and not e.is_dir(follow_symlinks=False)]
            for name in names:
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass
        finally:
            os.close(fd)


def apply_planned(workspace: Path, objects: ObjectStore, planned: PlannedRestore, *,
                  completing: bool = False) -> RestoreReport:
    """Apply a recorded plan; ``completing``: a killed apply of the same plan may have run before.

    A completion first clears the temp files a killed write left behind, and reports every
    planned removal whose path is gone as removed (the killed process removed some of them),
    so its report is the one the uninterrupted restore would have given.
    """
    plan = planned.plan()
    if completing:
        writer = _Writer(workspace)
        try:
            _remove_temp_leftovers(writer, plan)
        finally:
            writer.close()
    report = apply_restore(workspace, objects, plan, pivot=planned.pivot, bank=planned.bank)
    if completing:
        refused = {s["path"] for s in report.skipped}
        gone = [a for a in plan.actions if a.target is None and a.path not in refused]
        report.removed = sorted(a.path for a in gone)
        report.overwritten = sorted({*report.overwritten, *(a.path for a in gone if a.overwrites)})
        if report.restored or report.removed:
            report.message = (f"restored {len(report.restored)}, removed {len(report.removed)}, "
                              f"skipped {len(report.skipped)} of {plan.scope_paths} path(s) in scope")
    return report
